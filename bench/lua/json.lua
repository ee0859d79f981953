-- Scenario 1: one static request (wrk renders it once), a new conversation every time.
-- Preamble: PATH, BODY. Errors come from wrk's own counters (status >= 400, sockets).
COUNTERS = {}
wrk.method = "POST"
wrk.path = PATH
wrk.body = BODY
wrk.headers["Content-Type"] = "application/json"
if AUTHORIZATION ~= "" then
   wrk.headers["Authorization"] = AUTHORIZATION
end
