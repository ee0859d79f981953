-- Scenario 2: streams. wrk reads each chunked SSE body to its end; this checks every one:
-- status 200, exactly EXPECTED `data:` events, and `data: [DONE]` last iff EXPECT_DONE.
-- Preamble: PATH, BODY, EXPECTED, EXPECT_DONE.
COUNTERS = {"events", "good", "bad_status", "bad_body"}
wrk.method = "POST"
wrk.path = PATH
wrk.body = BODY
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "text/event-stream"

function init(args)
   events, good, bad_status, bad_body = 0, 0, 0, 0
end

function response(status, headers, body)
   if status ~= 200 then
      bad_status = bad_status + 1
      return
   end
   local n, i = 0, 1
   while true do
      local s = string.find(body, "data: ", i, true)
      if s == nil then break end
      n = n + 1
      i = s + 6
   end
   local done = string.sub(body, -14) == "data: [DONE]\n\n"
   if done then n = n - 1 end
   events = events + n
   if n == EXPECTED and done == EXPECT_DONE then
      good = good + 1
   else
      bad_body = bad_body + 1
   end
end
