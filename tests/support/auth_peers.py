"""Real peers for the authentication tests, served on loopback from a thread of the test
process (so a test can rotate keys, take a server down and count what it received):

- `JwksServer`: a JWKS endpoint (aiohttp) serving public keys generated with `cryptography`;
  `SigningKey` signs tokens with the private half.
- `FakeKubeApi`: a Kubernetes API over HTTPS, with a CA made by `TestCa`, answering
  `TokenReview` and `SubjectAccessReview` from tables the test sets.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import hmac
import ipaddress
import json
import ssl
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from tests.support.gateway_db import GatewayDb
from tests.support.gateway_proc import Gateway, HttpReply
from tests.support.processes import free_port


class ThreadServer:
    """An aiohttp application on 127.0.0.1 in its own thread and event loop; `down()`
    closes the listening socket (connections are refused) and `up()` reopens it."""

    def __init__(self, app: web.Application, ssl_context: ssl.SSLContext | None = None):
        self.port = free_port()
        self._app, self._ssl = app, ssl_context
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._runner = web.AppRunner(app, access_log=None)
        self._call(self._runner.setup())
        self._site: web.TCPSite | None = None
        self.up()

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)

    def up(self) -> None:
        self._site = web.TCPSite(self._runner, "127.0.0.1", self.port, ssl_context=self._ssl, reuse_address=True)
        self._call(self._site.start())

    def down(self) -> None:
        """Stop listening and drop open connections (a keep-alive client would otherwise
        still reach the server)."""
        if self._site is not None:
            self._call(self._drop(self._site))
            self._site = None

    async def _drop(self, site: web.TCPSite) -> None:
        await site.stop()
        server = self._runner.server
        for connection in server.connections if server is not None else []:
            connection.force_close()

    def close(self) -> None:
        self._call(self._runner.cleanup())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


SAME = object()


@dataclass
class SigningKey:
    kid: str | None
    algorithm: str
    private: Any
    # Whether the served JWK names its `alg` (a key without one takes it from its kty).
    publish_alg: bool = True

    @classmethod
    def rsa(cls, kid: str | None, publish_alg: bool = True) -> "SigningKey":
        return cls(kid, "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048), publish_alg)

    @classmethod
    def ec(cls, kid: str | None, publish_alg: bool = False) -> "SigningKey":
        return cls(kid, "ES256", ec.generate_private_key(ec.SECP256R1()), publish_alg)

    def jwk(self) -> dict[str, Any]:
        algorithm = jwt.algorithms.RSAAlgorithm if self.algorithm.startswith("RS") else jwt.algorithms.ECAlgorithm
        data = algorithm.to_jwk(self.private.public_key(), as_dict=True)
        if self.kid is not None:
            data["kid"] = self.kid
        if self.publish_alg:
            data["alg"] = self.algorithm
        data["use"] = "sig"
        return data

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo)

    def sign(self, claims: dict[str, Any], kid: Any = SAME, **header: Any) -> str:
        """A token signed with this key; `kid`: another kid to name, or None for none."""
        kid = self.kid if kid is SAME else kid
        headers = {**header, **({"kid": kid} if kid is not None else {})}
        return jwt.encode(claims, self.private, algorithm=self.algorithm, headers=headers)


def unsigned_token(claims: dict[str, Any], header: dict[str, Any]) -> str:
    """A token with whatever header the test wants and an empty signature (`alg: none`)."""
    return f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}."


def hmac_token(claims: dict[str, Any], header: dict[str, Any], secret: bytes) -> str:
    """HS256 by hand: PyJWT refuses a PEM public key as an HMAC secret, an attacker does not."""
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(signature)}"


class JwksServer:
    """Serves `keys` as a JWKS at `url`; over HTTPS with a certificate from `ca` when given."""

    def __init__(self, *keys: SigningKey, ca: "TestCa | None" = None):
        self.keys = list(keys)
        self.fetches = 0
        self.headers: list[dict[str, str]] = []   # each fetch's, names lower-cased
        app = web.Application()
        app.router.add_get("/jwks", self._jwks)
        self.server = ThreadServer(app, ca.server_context() if ca is not None else None)
        self.url = f"{'https' if ca is not None else 'http'}://127.0.0.1:{self.server.port}/jwks"

    async def _jwks(self, request: web.Request) -> web.Response:
        self.fetches += 1
        self.headers.append({name.lower(): value for name, value in request.headers.items()})
        return web.json_response({"keys": [key.jwk() for key in self.keys]})

    def close(self) -> None:
        self.server.close()


class TestCa:
    """A certificate authority made for one test session, and a server certificate it
    signed for 127.0.0.1."""

    __test__ = False

    def __init__(self, directory: Path):
        now = datetime.datetime.now(datetime.timezone.utc)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gateway test CA")])
        ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
                   .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(ca_key, hashes.SHA256()))
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
                .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                               critical=False)
                .sign(ca_key, hashes.SHA256()))
        directory.mkdir(parents=True, exist_ok=True)
        self.ca_path = directory / "ca.pem"
        self.ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
        self._cert_path = directory / "server.pem"
        self._cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self._key_path = directory / "server.key"
        self._key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption()))

    @property
    def server_files(self) -> tuple[Path, Path]:
        """The server certificate and its private key (PEM files)."""
        return self._cert_path, self._key_path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self._cert_path, self._key_path)
        return context


@dataclass
class FakeKubeApi:
    """TokenReview answers from `users` (token → user); SubjectAccessReview allows the
    usernames in `allowed`. Every review is recorded with the bearer the gateway sent."""

    ca: TestCa
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    allowed: set[str] = field(default_factory=set)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    cluster_id: str = "9b1f0a3e-cluster"

    def __post_init__(self) -> None:
        app = web.Application()
        app.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", self._token_review)
        app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", self._access_review)
        app.router.add_get("/apis/config.openshift.io/v1/clusterversions/version", self._cluster_version)
        self.server = ThreadServer(app, self.ca.server_context())
        self.url = f"https://127.0.0.1:{self.server.port}"

    def _record(self, request: web.Request, kind: str, body: dict[str, Any]) -> None:
        self.reviews.append({"kind": kind, "caller": request.headers.get("Authorization"), "spec": body["spec"],
                             "traceparent": request.headers.get("traceparent")})

    async def _token_review(self, request: web.Request) -> web.Response:
        body = await request.json()
        self._record(request, "TokenReview", body)
        user = self.users.get(body["spec"]["token"])
        status = {"authenticated": True, "user": user} if user else {"authenticated": False, "error": "invalid"}
        return web.json_response({**body, "status": status}, status=201)

    async def _access_review(self, request: web.Request) -> web.Response:
        body = await request.json()
        self._record(request, "SubjectAccessReview", body)
        spec = body["spec"]
        allowed = (spec.get("user") in self.allowed and spec.get("nonResourceAttributes")
                   == {"path": "/ls-access", "verb": "get"})
        return web.json_response({**body, "status": {"allowed": allowed}}, status=201)

    async def _cluster_version(self, request: web.Request) -> web.Response:
        self.reviews.append({"kind": "ClusterVersion", "caller": request.headers.get("Authorization")})
        return web.json_response({"kind": "ClusterVersion", "spec": {"clusterID": self.cluster_id}})

    def close(self) -> None:
        self.server.close()


def owner_of(gateway: Gateway, reply: HttpReply) -> str:
    """The user id the gateway recorded as the owner of a successful turn's conversation."""
    assert reply.status == 200, (reply.status, reply.body[:500])
    db = GatewayDb.of(gateway)
    row = db.wait_for_turn(reply.json()["id"])
    conversation = db.conversation(row["conversation_id"])
    assert conversation is not None
    return conversation["user_id"]


def claims(**extra: Any) -> dict[str, Any]:
    """Claims of a valid token for the jwk-token tests, with a unique `jti`."""
    now = int(time.time())
    return {"sub": "user-1", "preferred_username": "alice", "iss": "https://issuer.test", "aud": "gateway",
            "iat": now, "nbf": now, "exp": now + 600, "jti": uuid.uuid4().hex, **extra}
