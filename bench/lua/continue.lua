-- Scenario 1, second variant: every in-flight request continues a conversation that no
-- other request is using, like 32 clients each continuing their own conversation.
-- Preamble: PATH, INPUT (a JSON string literal), IDS_FILE (pre-started conversation ids, one a line),
-- TURNS (turns per conversation before a client moves on to a fresh one: the upstream
-- replays a conversation's whole history every turn, so unbounded conversations would
-- measure the upstream's history replay instead of the relay).
-- wrk cannot tell which connection a response came on, so each request carries its
-- conversation's index in `metadata` (echoed back by upstream and gateway alike).
COUNTERS = {"good", "bad_status", "lost", "exhausted"}
wrk.headers["Content-Type"] = "application/json"

function init(args)
   IDS = {}
   for line in io.lines(IDS_FILE) do
      table.insert(IDS, line)
   end
   ready, turns = {}, {}
   next_fresh, good, bad_status, lost, exhausted = 1, 0, 0, 0, 0
end

function request()
   local c = table.remove(ready)
   if c == nil then
      if next_fresh <= #IDS then
         c = next_fresh
         next_fresh = next_fresh + 1
      else
         -- Out of pre-started conversations: keep going on old ones (reported).
         exhausted = exhausted + 1
         c = (exhausted % #IDS) + 1
      end
   end
   local body = string.format('{"input":%s,"model":"scripted-chat","conversation":"%s","metadata":{"bench_c":"%d"}}',
                              INPUT, IDS[c], c)
   return wrk.format("POST", PATH, wrk.headers, body)
end

function response(status, headers, body)
   if status ~= 200 then
      bad_status = bad_status + 1
   end
   local c = tonumber(string.match(body, '"bench_c":"(%d+)"'))
   if c == nil then
      lost = lost + 1
      return
   end
   if status == 200 then
      good = good + 1
   end
   turns[c] = (turns[c] or 0) + 1
   if turns[c] < TURNS then
      table.insert(ready, c)
   end
end
