package builtin

import (
	"sync"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// This build of SQLite keeps no memory statistics by default
// (SQLITE_DEFAULT_MEMSTATUS=0), and without them sqlite3_hard_heap_limit64
// is ignored. They can only be turned on before SQLite initializes, that
// is before the process opens its first connection, hence init.
var heapLimitWorks = func() bool {
	tls := libc.NewTLS()
	defer tls.Close()
	va := libc.NewVaList(int32(1))
	defer libc.Xfree(tls, va)
	return sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_MEMSTATUS, va) == sqlite3.SQLITE_OK
}()

var heapLimit struct {
	sync.Mutex
	set  bool
	hard int64
}

// setHeapLimit bounds the memory SQLite allocates in the process (n < 0:
// no bound). Past the soft limit, three quarters of it, SQLite frees
// cached pages it can; past the hard limit, an allocation fails and the
// query fails with SQLITE_NOMEM.
func setHeapLimit(n int64) {
	n = max(n, 0) // 0 is SQLite's "no limit"
	heapLimit.Lock()
	defer heapLimit.Unlock()
	if heapLimit.set && heapLimit.hard == n {
		return
	}
	tls := libc.NewTLS()
	defer tls.Close()
	sqlite3.Xsqlite3_hard_heap_limit64(tls, n)
	sqlite3.Xsqlite3_soft_heap_limit64(tls, n/4*3)
	heapLimit.set, heapLimit.hard = true, n
}
