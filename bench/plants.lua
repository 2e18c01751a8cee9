-- wrk script: send a workload, and count every answer that is not 200.
-- Arguments after `--`: the bearer token, the number of wrk threads, then either
--   create FIRST_ID: POST /plants with a fresh id each request, from FIRST_ID on; wrk calls
--     request() once more before the run to check the script: that id is skipped, and no id
--     is ever sent twice;
--   read FILE: GET each path of FILE (one a line) in turn, over and over.

local threads = {}

function setup(thread)
  thread:set("offset", #threads)
  table.insert(threads, thread)
end

function init(args)
  token = "Bearer " .. args[1]
  stride = tonumber(args[2])
  unexpected = 0
  if args[3] == "create" then
    next_id = tonumber(args[4]) + offset
    headers = {["Authorization"] = token, ["Content-Type"] = "application/json"}
    request = create
  else
    paths = {}
    for path in io.lines(args[4]) do
      paths[#paths + 1] = path
    end
    next_path = offset % #paths + 1
    headers = {["Authorization"] = token}
    request = read
  end
end

function create()
  local id = next_id
  next_id = next_id + stride
  local body = string.format('{"id":%d,"name":"plant-%d","tag":"tree"}', id, id)
  return wrk.format("POST", "/plants", headers, body)
end

function read()
  local path = paths[next_path]
  next_path = (next_path + stride - 1) % #paths + 1
  return wrk.format("GET", path, headers)
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
