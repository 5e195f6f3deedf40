// The PJRT key-value callbacks over a KeyValueStore (user_arg): how a multi-process client's
// plugin exchanges its topology through the c10d Store. Errors go back through the plugin's
// callback_error; a missing key in try-get is NOT_FOUND, a get past its timeout DEADLINE_EXCEEDED.
#pragma once

#include "pjrt_c_api.h"
#include "runtime/client.h"

namespace tpu::rt {

PJRT_Error* KvGet(PJRT_KeyValueGetCallback_Args* args);
PJRT_Error* KvTryGet(PJRT_KeyValueTryGetCallback_Args* args);
PJRT_Error* KvPut(PJRT_KeyValuePutCallback_Args* args);

}  // namespace tpu::rt
