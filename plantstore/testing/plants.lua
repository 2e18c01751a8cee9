-- wrk script of the bench and of the load tests: send a workload, and tally every answer.
-- Arguments after `--`: the bearer token, the number of wrk threads, then either
--   create FIRST_ID [ACKED_FILE]: POST /plants with a fresh id each request, from FIRST_ID on;
--     wrk calls request() once more before the run to check the script: that id is skipped,
--     and no id is ever sent twice. With ACKED_FILE, the id of every plant answered 200 is
--     written there, one a line: the name carries the id, so the answer tells which it was;
--   read FILE: GET each path of FILE (one a line) in turn, over and over;
--   revalidate FILE: the same, each line a path and its plant's ETag (unquoted), sent as
--     If-None-Match; the plants do not change, so each answers 304;
--   replace FILE FIRST_VERSION: PUT each path of FILE (/plants/ID) in turn, over and over, with
--     the plant renamed plant-ID-vVERSION, a fresh version each request from FIRST_VERSION on:
--     each replaces a stored plant with another, answered 200;
--   delete FILE: DELETE each path of FILE in turn, and expect 204: each plant is deleted once
--     while the paths last, and a path sent again (they ran out) answers 404.
-- The last line printed is `BENCH {...}`: the run's figures, and the answers of another status
-- than the one expected (200; 304 to a revalidation, 204 to a delete) by status.

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
    tags = {}
    for line in io.lines(args[4]) do
      local path, tag = line:match("^(%S+) ?(%S*)$")
      paths[#paths + 1] = path
      tags[#tags + 1] = tag
    end
    next_path = offset % #paths + 1
    headers = {["Authorization"] = token}
    method = "GET"
    request = send_path
    if args[3] == "revalidate" then
      expected = 304
      request = revalidate
    elseif args[3] == "replace" then
      headers["Content-Type"] = "application/json"
      next_version = tonumber(args[5]) + offset
      request = replace
    elseif args[3] == "delete" then
      method = "DELETE"
      expected = 204
    end
  end
end

-- The index of the path to send, and the next one's after it.
function take_path()
  local taken = next_path
  next_path = (next_path + stride - 1) % #paths + 1
  return taken
end

function create()
  local id = next_id
  next_id = next_id + stride
  local body = string.format('{"id":%d,"name":"plant-%d","tag":"tree"}', id, id)
  return wrk.format("POST", "/plants", headers, body)
end

function send_path()
  return wrk.format(method, paths[take_path()], headers)
end

function revalidate()
  local taken = take_path()
  headers["If-None-Match"] = '"' .. tags[taken] .. '"'
  return wrk.format("GET", paths[taken], headers)
end

function replace()
  local path = paths[take_path()]
  local version = next_version
  next_version = next_version + stride
  local id = path:match("/plants/(%-?%d+)$")
  local body = string.format('{"name":"plant-%s-v%d","tag":"tree"}', id, version)
  return wrk.format("PUT", path, headers, body)
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
