-- wrk script: POST /plants with a fresh id each request, and count every answer that is not 200.
-- Arguments after `--`: the first id, the number of wrk threads, the bearer token.
-- wrk calls request() once more before the run to check the script: that id is skipped, and no
-- id is ever sent twice.

local threads = {}

function setup(thread)
  thread:set("offset", #threads)
  table.insert(threads, thread)
end

function init(args)
  next_id = tonumber(args[1]) + offset
  stride = tonumber(args[2])
  headers = {["Authorization"] = "Bearer " .. args[3], ["Content-Type"] = "application/json"}
  unexpected = 0
end

function request()
  local id = next_id
  next_id = next_id + stride
  local body = string.format('{"id":%d,"name":"plant-%d","tag":"tree"}', id, id)
  return wrk.format("POST", "/plants", headers, body)
end

function response(status, headers, body)
  if status ~= 200 then
    unexpected = unexpected + 1
  end
end

function done(summary, latency, requests)
  local unexpected = 0
  for _, thread in ipairs(threads) do
    unexpected = unexpected + thread:get("unexpected")
  end
  local errors = summary.errors
  io.write(string.format(
    'BENCH {"requests": %d, "seconds": %f, "p50_us": %d, "p99_us": %d, "unexpected": %d, ' ..
    '"socket_errors": %d}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50), latency:percentile(99),
    unexpected, errors.connect + errors.read + errors.write + errors.timeout))
end
