// GetLog, the RPC Impala's HiveServer2 service adds to TCLIService (impyla calls it before closing a query).
// Written for sqlext; generated into sqlext/server/third_party/getlog with `thrift --gen py:slots`.
include "TCLIService.thrift"

namespace py sqlext.server.third_party.getlog

struct TGetLogReq {
  1: required TCLIService.TOperationHandle operationHandle
}

struct TGetLogResp {
  1: required TCLIService.TStatus status
  2: required string log
}

service TGetLogService {
  TGetLogResp GetLog(1: TGetLogReq req);
}
