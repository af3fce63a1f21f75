// tern's IDL for BMv2's `simple_switch` Thrift service (target-specific calls: mirroring
// sessions, egress queues, clocks). Written for tern from shared/reference/runtime-cli.md §3.4.

namespace rs simple_switch

struct MirroringSessionConfig {
  1: optional i32 port,
  2: optional i32 mgid
}

enum MirroringOperationErrorCode {
  SESSION_NOT_FOUND = 1
}

exception InvalidMirroringOperation {
  1: MirroringOperationErrorCode code
}

service SimpleSwitch {

  i32 mirroring_mapping_add(1: i32 mirror_id, 2: i32 egress_port),
  i32 mirroring_mapping_delete(1: i32 mirror_id),
  i32 mirroring_mapping_get_egress_port(1: i32 mirror_id),

  void mirroring_session_add(1: i32 mirror_id, 2: MirroringSessionConfig config)
    throws (1: InvalidMirroringOperation ouch),

  void mirroring_session_delete(1: i32 mirror_id)
    throws (1: InvalidMirroringOperation ouch),

  MirroringSessionConfig mirroring_session_get(1: i32 mirror_id)
    throws (1: InvalidMirroringOperation ouch),

  i32 set_egress_priority_queue_depth(1: i32 port_num, 2: i32 priority, 3: i32 depth_pkts),
  i32 set_egress_queue_depth(1: i32 port_num, 2: i32 depth_pkts),
  i32 set_all_egress_queue_depths(1: i32 depth_pkts),
  i32 set_egress_priority_queue_rate(1: i32 port_num, 2: i32 priority, 3: i64 rate_pps),
  i32 set_egress_queue_rate(1: i32 port_num, 2: i64 rate_pps),
  i32 set_all_egress_queue_rates(1: i64 rate_pps),

  i64 get_time_elapsed_us(),
  i64 get_time_since_epoch_us()
}
