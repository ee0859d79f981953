"""Engine mode's `input_image` URLs under the destination policy (images.py)."""

from __future__ import annotations

import pytest

from gateway.engine.images import check_images, image_policy, image_urls
from gateway.schema.errors import ApiError

PNG = "data:image/png;base64,iVBORw0KGgo="


def message(*urls):
    return {"role": "user", "content": [{"type": "input_text", "text": "look"},
                                        *({"type": "input_image", "image_url": url} for url in urls)]}


def test_the_urls_and_where_they_are():
    input_ = [message("https://a.example/1.png"), {"type": "function_call_output", "call_id": "c",
                                                   "output": [{"type": "input_image", "image_url": PNG}]},
              message({"url": "https://b.example/2.png"})]
    assert list(image_urls(input_)) == [("input[0].content[1].image_url", "https://a.example/1.png"),
                                        ("input[1].output[0].image_url", PNG),
                                        ("input[2].content[1].image_url", "https://b.example/2.png")]
    assert list(image_urls("just text")) == []


@pytest.mark.parametrize("url, why", [
    ("http://203.0.114.1/cat.png", "must be an https URL"),
    ("file:///etc/passwd", "must be an https URL"),
    ("https://127.0.0.1/cat.png", "loopback"),
    ("https://[::ffff:169.254.169.254]/latest/meta-data", "metadata"),
    ("https://10.1.2.3/cat.png", "private"),
    ("https://169.254.10.10/cat.png", "link-local"),
    ("https://localhost/cat.png", "loopback"),  # judged on what the name resolves to
])
async def test_refused_with_a_400_naming_the_part(url, why):
    with pytest.raises(ApiError) as caught:
        await check_images([message(PNG, url)], image_policy([]))
    assert caught.value.status == 400 and caught.value.error_type == "invalid_request_error"
    assert caught.value.param == "input[0].content[2].image_url" and why in caught.value.cause


async def test_data_urls_public_addresses_and_the_operators_exceptions_pass():
    await check_images([message(PNG, "https://8.8.8.8/cat.png")], image_policy([]))
    await check_images([message("https://10.1.2.3/cat.png", "https://localhost/x.png")],
                       image_policy(["10.0.0.0/8", "localhost"]))
