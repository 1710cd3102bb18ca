package load

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
)

// Sample is the process's resource use at one moment.
type Sample struct {
	Goroutines int
	// HeapInUse is the bytes of live and not yet swept heap objects
	// (runtime/metrics /memory/classes/heap/objects:bytes).
	HeapInUse uint64
	// RSS and PeakRSS are VmRSS and VmHWM from /proc/self/status.
	RSS, PeakRSS uint64
	// FDs is the number of open file descriptors (/proc/self/fd).
	FDs int
}

func (s Sample) String() string {
	return fmt.Sprintf("goroutines=%d heap_inuse=%s rss=%s peak_rss=%s fds=%d",
		s.Goroutines, MiB(s.HeapInUse), MiB(s.RSS), MiB(s.PeakRSS), s.FDs)
}

// MiB formats a byte count in MiB.
func MiB(b uint64) string { return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20)) }

const heapObjects = "/memory/classes/heap/objects:bytes"

// ReadSample reads the resource use now. With gc set it first collects
// garbage (twice, so that finalizers queued by the first run and their
// objects go too) so HeapInUse is the live heap.
func ReadSample(gc bool) (Sample, error) {
	if gc {
		runtime.GC()
		runtime.GC()
		debug.FreeOSMemory()
	}
	m := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(m)
	s := Sample{Goroutines: runtime.NumGoroutine(), HeapInUse: m[0].Value.Uint64()}
	var err error
	if s.RSS, s.PeakRSS, err = readStatus(); err != nil {
		return s, err
	}
	if s.FDs, err = countFDs(); err != nil {
		return s, err
	}
	return s, nil
}

// readStatus returns VmRSS and VmHWM in bytes.
func readStatus() (rss, hwm uint64, err error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, fmt.Errorf("resident memory: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(value), "kB")), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/self/status %s: %w", name, err)
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	if rss == 0 || hwm == 0 {
		return 0, 0, fmt.Errorf("/proc/self/status has no VmRSS or VmHWM")
	}
	return rss, hwm, nil
}

// ResetPeakRSS starts a new VmHWM period at the current RSS (Linux
// clear_refs "5"), so that the peak reported afterwards is this test's.
func ResetPeakRSS() error {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// countFDs counts the open file descriptors.
func countFDs() (int, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, fmt.Errorf("open files: %w", err)
	}
	return len(entries) - 1, nil // less the one ReadDir itself holds
}

// FDKinds summarises the open descriptors by what they point at (socket,
// pipe, anon_inode:…, or the directory of a file), for leak reports.
func FDKinds() map[string]int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	kinds := map[string]int{}
	for _, e := range entries {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(target, "socket:"):
			target = "socket"
		case strings.HasPrefix(target, "pipe:"):
			target = "pipe"
		case strings.HasPrefix(target, "/"):
			if i := strings.LastIndexByte(target, '/'); i > 0 {
				target = target[:i] + "/…"
			}
		}
		kinds[target]++
	}
	return kinds
}

// GoroutineProfile returns the stacks of every goroutine, identical
// stacks grouped with their count (pprof debug=1), for leak reports.
func GoroutineProfile() string {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.String()
}
