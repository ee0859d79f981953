-- Shared by every benchmark script (the Python side prepends a `local` preamble with
-- the scenario's constants). `done` prints one machine-readable line for bench/loadgen.py.
-- Counters are globals of each thread's Lua state, summed across threads here.
local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

local function total(name)
   local sum = 0
   for _, thread in ipairs(threads) do
      sum = sum + (thread:get(name) or 0)
   end
   return sum
end

function done(summary, latency, requests)
   local e = summary.errors
   local parts = {
      string.format('"requests":%.0f,"duration_us":%.0f,"bytes":%.0f', summary.requests, summary.duration,
                    summary.bytes),
      string.format('"connect":%.0f,"read":%.0f,"write":%.0f,"status":%.0f,"timeout":%.0f',
                    e.connect, e.read, e.write, e.status, e.timeout),
   }
   for _, p in ipairs({50, 90, 99}) do
      table.insert(parts, string.format('"p%d_us":%.0f', p, latency:percentile(p)))
   end
   for _, name in ipairs(COUNTERS) do
      table.insert(parts, string.format('"%s":%.0f', name, total(name)))
   end
   io.write("BENCH_RESULT {" .. table.concat(parts, ",") .. "}\n")
end
