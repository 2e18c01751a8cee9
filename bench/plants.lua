-- wrk script of the bench and of the load tests: send a workload, and tally every answer.
-- Arguments after `--`: the bearer token, the number of wrk threads, then either
--   create FIRST_ID [ACKED_FILE]: POST /plants with a fresh id each request, from FIRST_ID on;
--     wrk calls request() once more before the run to check the script: that id is skipped,
--     and no id is ever sent twice. With ACKED_FILE, the id of every plant answered 200 is
--     written there, one a line: the name carries the id, so the answer tells which it was;
--   read FILE: GET each path of FILE (one a line) in turn, over and over;
--   delete FILE: DELETE each path of FILE in turn, and expect 204: each plant is deleted once
--     while the paths last, and a path sent again (they ran out) answers 404.
-- The last line printed is `BENCH {...}`: the run's figures, and the answers of another status
-- than the one expected (200, or 204 to a delete) by status.

local threads = {}

function setup(thread)
  thread:set("offset", #threads)
  table.insert(threads, thread)
end

function init(args)
  token = "Bearer " .. args[1]
  stride = tonumber(args[2])
  other_statuses = {}
  acked = {}
  expected = 200
  if args[3] == "create" then
    next_id = tonumber(args[4]) + offset
    acked_file = args[5]
    headers = {["Authorization"] = token, ["Content-Type"] = "application/json"}
    request = create
  else
    paths = {}
    for path in io.lines(args[4]) do
      paths[#paths + 1] = path
    end
    next_path = offset % #paths + 1
    headers = {["Authorization"] = token}
    method = "GET"
    if args[3] == "delete" then
      method = "DELETE"
      expected = 204
    end
    request = send_path
  end
end

function create()
  local id = next_id
  next_id = next_id + stride
  local body = string.format('{"id":%d,"name":"plant-%d","tag":"tree"}', id, id)
  return wrk.format("POST", "/plants", headers, body)
end

function send_path()
  local path = paths[next_path]
  next_path = (next_path + stride - 1) % #paths + 1
  return wrk.format(method, path, headers)
end

function response(status, headers, body)
  if status ~= expected then
    other_statuses[status] = (other_statuses[status] or 0) + 1
  elseif acked_file then
    table.insert(acked, body:match('"plant%-(%-?%d+)"'))
  end
end

function done(summary, latency, requests)
  local statuses = {}
  local file = threads[1]:get("acked_file") and io.open(threads[1]:get("acked_file"), "w")
  for _, thread in ipairs(threads) do
    for status, count in pairs(thread:get("other_statuses")) do
      statuses[status] = (statuses[status] or 0) + count
    end
    if file then
      for _, id in ipairs(thread:get("acked")) do
        file:write(id, "\n")
      end
    end
  end
  if file then
    file:close()
  end
  local others = {}
  for status, count in pairs(statuses) do
    table.insert(others, string.format('"%d": %d', status, count))
  end
  local errors = summary.errors
  io.write(string.format(
    'BENCH {"requests": %d, "seconds": %f, "p50_us": %d, "p99_us": %d, ' ..
    '"other_statuses": {%s}, "socket_errors": {"connect": %d, "read": %d, "write": %d, ' ..
    '"timeout": %d}}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50), latency:percentile(99),
    table.concat(others, ", "), errors.connect, errors.read, errors.write, errors.timeout))
end
