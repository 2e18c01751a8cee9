-- wrk script: every request creates a new plant, valid by the contract.
--
-- wrk -s tests/load.lua URL -- TOKEN ACKED_FILE MAX_REQUESTS_PER_THREAD
--
-- Ids are unique across threads. The name carries the id, so the answer (the plant as
-- stored) tells which plant was acknowledged: each id answered 200 is written to ACKED_FILE,
-- one a line. A thread stops after MAX_REQUESTS_PER_THREAD requests, or when wrk's -d ends.
-- The last line printed is a JSON summary.

local threads = {}

function setup(thread)
   thread:set("first_id", #threads * 1000000000)
   table.insert(threads, thread)
end

function init(args)
   token, acked_file, max_requests = args[1], args[2], tonumber(args[3])
   sent, acked, other_statuses = 0, {}, {}
end

function request()
   sent = sent + 1
   local id = first_id + sent
   local body = string.format('{"id": %d, "name": "plant-%d", "tag": "load"}', id, id)
   local headers = {["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json"}
   return wrk.format("POST", "/plants", headers, body)
end

function response(status, headers, body)
   if status == 200 then
      table.insert(acked, body:match('"plant%-(%d+)"'))
   else
      other_statuses[tostring(status)] = (other_statuses[tostring(status)] or 0) + 1
   end
   if sent >= max_requests then
      wrk.thread:stop()
   end
end

function done(summary, latency, requests)
   local file = io.open(threads[1]:get("acked_file"), "w")
   local acked_count, statuses = 0, {}
   for _, thread in ipairs(threads) do
      for _, id in ipairs(thread:get("acked")) do
         file:write(id, "\n")
         acked_count = acked_count + 1
      end
      for status, count in pairs(thread:get("other_statuses")) do
         statuses[status] = (statuses[status] or 0) + count
      end
   end
   file:close()
   local others = {}
   for status, count in pairs(statuses) do
      table.insert(others, string.format('"%s": %d', status, count))
   end
   local errors = summary.errors
   io.write(string.format(
      '{"requests": %d, "acked": %d, "other_statuses": {%s}, "duration_us": %d, ' ..
      '"errors": {"connect": %d, "read": %d, "write": %d, "timeout": %d}, ' ..
      '"latency_p99_us": %d}\n',
      summary.requests, acked_count, table.concat(others, ", "), summary.duration,
      errors.connect, errors.read, errors.write, errors.timeout, latency:percentile(99)))
end
