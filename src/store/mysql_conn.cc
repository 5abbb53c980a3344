// SqlConn over MariaDB Connector/C (placeholder until the real implementation lands).
#include "store/sql_conn.h"

namespace falcon::store::internal {

absl::StatusOr<std::unique_ptr<SqlConn>> OpenMysqlConn(const MysqlParams& params) {
  return absl::UnimplementedError("the MariaDB store is not implemented yet");
}

}  // namespace falcon::store::internal
