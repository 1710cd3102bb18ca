package toolrunner

import "github.com/baagent/baagent/internal/grpcclient"

// HookTLS secures a gRPC hook's connection (`grpc.tls:`; the same keys as
// a ToolProvider's `tls:`).
type HookTLS = grpcclient.TLSFiles
