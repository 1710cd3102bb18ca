package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baagent/baagent/services/gateway/internal/natstest"
)

// The SSE load generator. Its clients run in a separate process (this test
// binary re-executed as TestLoadgenHelper), and for the fan-out benchmark
// so do the NATS server and the publisher (a third process), so the
// benchmark process holds only the gateway: the CPU measured there is the
// gateway's own, not the clients', the broker's or the publisher's.
//
// The parent and a helper talk over the helper's stdin and stdout. A
// client helper prints "ready" once every client's stream is open, then
// (fan-out) one "result" line when the run has ended, or (idle) waits for
// stdin to close. The publisher helper prints "ready <nats url>", then
// answers each command line ("text <tenant> <run> <n> <rate>": n text
// events, each carrying its publish time, paced at rate per second;
// "complete <tenant> <run>") with "published <seq>".

const (
	loadgenEnv        = "BAAGENT_GATEWAY_LOADGEN" // "fanout", "fanout-ws" or "idle"
	loadgenURLEnv     = "BAAGENT_GATEWAY_LOADGEN_URL"
	loadgenClientsEnv = "BAAGENT_GATEWAY_LOADGEN_CLIENTS"
	loadgenKeyEnv     = "BAAGENT_GATEWAY_LOADGEN_KEY"
	// loadgenProfileEnv, when set, names a file the client helper writes
	// its CPU profile to (to see what the clients cost the machine).
	loadgenProfileEnv = "BAAGENT_GATEWAY_LOADGEN_CPUPROFILE"
)

// loadgen is a running client process.
type loadgen struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// startLoadgen starts clients SSE clients of url in a helper process and
// waits until all of them are streaming.
func startLoadgen(tb testing.TB, mode, url string, clients int) *loadgen {
	tb.Helper()
	lg := startHelper(tb, mode, loadgenURLEnv+"="+url, loadgenClientsEnv+"="+strconv.Itoa(clients), loadgenKeyEnv+"="+keyAcme)
	if line := lg.line(tb); line != "ready" {
		tb.Fatalf("load generator: %q, want ready", line)
	}
	return lg
}

// startPublisher starts the NATS server and publisher process and returns
// it with the server's client URL.
func startPublisher(tb testing.TB) (*loadgen, string) {
	tb.Helper()
	lg := startHelper(tb, "publisher")
	url, ok := strings.CutPrefix(lg.line(tb), "ready ")
	if !ok {
		tb.Fatal("publisher: no NATS URL")
	}
	return lg, url
}

// command sends a command line to the publisher, waits for its answer and
// returns the publisher process's CPU time so far (NATS server included).
func (lg *loadgen) command(tb testing.TB, format string, args ...any) time.Duration {
	tb.Helper()
	if _, err := fmt.Fprintf(lg.stdin, format+"\n", args...); err != nil {
		tb.Fatalf("publisher: %v", err)
	}
	l := lg.line(tb)
	var seq, cpu int64
	if _, err := fmt.Sscanf(l, "published %d cpu=%d", &seq, &cpu); err != nil {
		tb.Fatalf("publisher: %q: %v", l, err)
	}
	return time.Duration(cpu)
}

// startHelper re-executes the test binary as TestLoadgenHelper in mode.
func startHelper(tb testing.TB, mode string, env ...string) *loadgen {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadgenHelper$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), loadgenEnv+"="+mode), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	lg := &loadgen{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	tb.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	return lg
}

// line returns the helper's next protocol line (the test framework's own
// output, such as PASS, is skipped).
func (lg *loadgen) line(tb testing.TB) string {
	tb.Helper()
	for lg.out.Scan() {
		l := lg.out.Text()
		if l == "ready" || strings.HasPrefix(l, "ready ") || strings.HasPrefix(l, "result ") ||
			strings.HasPrefix(l, "published ") || strings.HasPrefix(l, "error ") {
			if strings.HasPrefix(l, "error ") {
				tb.Fatalf("load generator: %s", l)
			}
			return l
		}
	}
	tb.Fatalf("load generator ended: %v", lg.out.Err())
	return ""
}

// fanoutResult is what the helper reports: how many latencies it measured
// and their percentiles.
type fanoutResult struct {
	count         int
	p50, p99, max time.Duration
	cores         float64 // the clients' CPU
}

func (lg *loadgen) result(tb testing.TB) fanoutResult {
	tb.Helper()
	var r fanoutResult
	var p50, p99, mx int64
	if _, err := fmt.Sscanf(lg.line(tb), "result count=%d p50=%d p99=%d max=%d cores=%g", &r.count, &p50, &p99, &mx, &r.cores); err != nil {
		tb.Fatalf("load generator result: %v", err)
	}
	r.p50, r.p99, r.max = time.Duration(p50), time.Duration(p99), time.Duration(mx)
	return r
}

// TestLoadgenHelper is the client side of the load generator; it only
// runs when a benchmark starts it.
func TestLoadgenHelper(t *testing.T) {
	mode := os.Getenv(loadgenEnv)
	if mode == "" {
		t.Skip("the SSE load generator's client process; the fan-out benchmarks start it")
	}
	if mode == "publisher" {
		if err := runPublisher(); err != nil {
			fmt.Printf("error %v\n", err)
		}
		return
	}
	raiseFDLimit(t)
	if path := os.Getenv(loadgenProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Printf("error %v\n", err)
			return
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Printf("error %v\n", err)
			return
		}
		defer pprof.StopCPUProfile()
	}
	n, err := strconv.Atoi(os.Getenv(loadgenClientsEnv))
	if err != nil || n < 1 {
		fmt.Printf("error bad %s\n", loadgenClientsEnv)
		return
	}
	if err := runLoadgen(mode, os.Getenv(loadgenURLEnv), os.Getenv(loadgenKeyEnv), n); err != nil {
		fmt.Printf("error %v\n", err)
	}
}

func runLoadgen(mode, url, key string, n int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the parent closing stdin (or dying) ends the clients
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if mode == "fanout-ws" || mode == "fanout" && epollLoadgen {
		return runFanoutEpoll(ctx, url, key, n, mode == "fanout-ws")
	}
	tr := &http.Transport{
		MaxIdleConnsPerHost: -1,
		DisableCompression:  true,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	streams := make([]*http.Response, n)
	err := openStreams(n, func(i int) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err == nil && resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			err = fmt.Errorf("status %s", resp.Status)
		}
		streams[i] = resp
		return err
	})
	if err != nil {
		return err
	}
	fmt.Println("ready")
	if mode == "idle" {
		<-ctx.Done()
		for _, s := range streams {
			s.Body.Close()
		}
		return nil
	}

	cpu0, wall0 := processCPU(), time.Now()
	lats := make([][]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Body.Close()
			lats[i], errs[i] = readLatencies(s.Body)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	cores := float64(processCPU()-cpu0) / float64(time.Since(wall0))
	return printResult(slices.Concat(lats...), cores)
}

// openStreams runs open(i) for each of n streams, a few hundred at a time
// (within the listen backlog), and returns the first failure.
func openStreams(n int, open func(i int) error) error {
	sem := make(chan struct{}, 200)
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		openErr error
	)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := open(i); err != nil {
				errOnce.Do(func() { openErr = fmt.Errorf("stream %d: %w", i, err) })
			}
		}()
	}
	wg.Wait()
	return openErr
}

// printResult prints the fan-out result line: the latencies' count and
// percentiles, and the clients' CPU.
func printResult(all []time.Duration, cores float64) error {
	if len(all) == 0 {
		return errors.New("no events received")
	}
	slices.Sort(all)
	fmt.Printf("result count=%d p50=%d p99=%d max=%d cores=%.3f\n", len(all), all[len(all)/2], all[len(all)*99/100], all[len(all)-1], cores)
	return nil
}

// runPublisher is the publisher helper: an embedded NATS server with the
// streams provisioned and a publisher of run events, driven by commands on
// stdin until it closes.
func runPublisher() error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "gateway-loadgen-nats-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, js, nc, err := natstest.Start(ctx, dir)
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	defer nc.Close()
	fmt.Println("ready " + srv.ClientURL())
	runs := map[string]*natstest.Run{}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			return fmt.Errorf("bad command %q", sc.Text())
		}
		r := runs[f[1]+"/"+f[2]]
		if r == nil {
			r = natstest.NewRun(js, f[1], f[2])
			runs[f[1]+"/"+f[2]] = r
		}
		switch {
		case f[0] == "text" && len(f) == 5:
			n, err1 := strconv.Atoi(f[3])
			rate, err2 := strconv.Atoi(f[4])
			if err := errors.Join(err1, err2); err != nil || rate < 1 {
				return fmt.Errorf("bad command %q: %v", sc.Text(), err)
			}
			if err := publishPaced(ctx, r, n, rate); err != nil {
				return err
			}
		case f[0] == "complete":
			if _, err := r.Complete(ctx, "done"); err != nil {
				return err
			}
		default:
			return fmt.Errorf("bad command %q", sc.Text())
		}
		fmt.Printf("published %d cpu=%d\n", r.Seq(), processCPU())
	}
	return sc.Err()
}

// publishPaced publishes n text events at rate per second, each carrying
// its publish time (Unix ns) so the clients can measure publish-to-client
// latency on the same clock.
func publishPaced(ctx context.Context, r *natstest.Run, n, rate int) error {
	interval := time.Second / time.Duration(rate)
	next := time.Now()
	for range n {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		if _, err := r.Text(ctx, strconv.FormatInt(time.Now().UnixNano(), 10)); err != nil {
			return err
		}
	}
	return nil
}

// readLatencies reads one SSE stream until its complete event (see
// sseLatencies).
func readLatencies(r io.Reader) ([]time.Duration, error) {
	var p sseLatencies
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 && p.feed(buf[:n], time.Now()) {
			return p.lats, nil
		}
		if err != nil {
			return p.lats, fmt.Errorf("stream ended before complete: %w", err)
		}
	}
}

// sseLatencies parses an SSE stream fed as it is read and measures, for
// each text_delta, the time from publish to the read that brought it: the
// publisher puts its clock (Unix ns) in the delta, so both ends read the
// same clock. It allocates nothing per event once its line buffer has
// grown, so that the clients, which share the machine with the gateway,
// take as little of it as they can.
type sseLatencies struct {
	line      []byte // an incomplete line carried over to the next read
	textDelta bool   // the event being read is a text_delta
	done      bool   // the complete event was read
	lats      []time.Duration
}

// feed parses b, read at now; it reports whether the stream is complete.
func (p *sseLatencies) feed(b []byte, now time.Time) bool {
	for len(b) > 0 && !p.done {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.line = append(p.line, b...)
			return false
		}
		line := b[:i]
		if len(p.line) > 0 {
			p.line = append(p.line, line...)
			line = p.line
		}
		p.parseLine(line, now)
		p.line = p.line[:0]
		b = b[i+1:]
	}
	return p.done
}

func (p *sseLatencies) parseLine(line []byte, now time.Time) {
	switch {
	case bytes.HasPrefix(line, eventPrefix):
		typ := bytes.TrimSpace(line[len(eventPrefix):])
		p.done = string(typ) == "complete"
		p.textDelta = string(typ) == "text_delta"
	case p.textDelta && bytes.HasPrefix(line, dataPrefix):
		if ns, ok := deltaStamp(line); ok {
			p.lats = append(p.lats, now.Sub(time.Unix(0, ns)))
		}
	}
}

// deltaStamp reads the publish time (Unix nanoseconds) that the load
// generator's text deltas carry as their text, from an event's JSON.
func deltaStamp(event []byte) (int64, bool) {
	i := bytes.Index(event, deltaKey)
	if i < 0 {
		return 0, false
	}
	rest := event[i+len(deltaKey):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return 0, false
	}
	return parseNanos(rest[:j])
}

var (
	eventPrefix = []byte("event: ")
	dataPrefix  = []byte("data: ")
	deltaKey    = []byte(`"delta":"`)
)

// wsLatencies is sseLatencies for a WebSocket: it parses the server's
// frames as they are read and queues a masked pong for each ping, which
// the reader sends.
type wsLatencies struct {
	carry []byte // an incomplete frame carried over to the next read
	pongs []byte
	done  bool
	lats  []time.Duration
}

// feed parses b, read at now; it reports whether the stream is complete.
func (p *wsLatencies) feed(b []byte, now time.Time) (bool, error) {
	if len(p.carry) > 0 {
		p.carry = append(p.carry, b...)
		b = p.carry
	}
	for !p.done {
		op, payload, n := serverFrame(b)
		if n == 0 {
			break
		}
		switch op {
		case 0x1: // text
			p.message(payload, now)
		case 0x8: // close
			return false, fmt.Errorf("closed before complete: %q", payload)
		case 0x9: // ping
			p.pongs = append(p.pongs, 0x8A, 0x80|byte(len(payload)), 0, 0, 0, 0) // mask 0: the payload as is
			p.pongs = append(p.pongs, payload...)
		}
		b = b[n:]
	}
	p.carry = append(p.carry[:0], b...)
	return p.done, nil
}

// serverFrame splits the first whole frame off b (unmasked, as a server
// sends): its opcode, payload and length, or n 0 when b holds none yet.
func serverFrame(b []byte) (op byte, payload []byte, n int) {
	if len(b) < 2 {
		return 0, nil, 0
	}
	size, head := uint64(b[1]&0x7F), 2
	switch size {
	case 126:
		if len(b) < 4 {
			return 0, nil, 0
		}
		size, head = uint64(binary.BigEndian.Uint16(b[2:4])), 4
	case 127:
		if len(b) < 10 {
			return 0, nil, 0
		}
		size, head = binary.BigEndian.Uint64(b[2:10]), 10
	}
	if uint64(len(b)-head) < size {
		return 0, nil, 0
	}
	end := head + int(size)
	return b[0] & 0x0F, b[head:end], end
}

func (p *wsLatencies) message(m []byte, now time.Time) {
	switch {
	case bytes.Contains(m, typeComplete):
		p.done = true
	case bytes.Contains(m, typeTextDelta):
		if ns, ok := deltaStamp(m); ok {
			p.lats = append(p.lats, now.Sub(time.Unix(0, ns)))
		}
	}
}

var (
	typeComplete  = []byte(`"type":"complete"`)
	typeTextDelta = []byte(`"type":"text_delta"`)
)

// parseNanos parses a decimal int64 without allocating.
func parseNanos(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// raiseFDLimit lifts the soft open-files limit to the hard one, for
// thousands of connections.
func raiseFDLimit(tb testing.TB) {
	tb.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatal(err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			tb.Fatal(err)
		}
	}
}

// needFDs skips when the open-files limit cannot hold n connections.
func needFDs(tb testing.TB, n int) {
	tb.Helper()
	raiseFDLimit(tb)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatal(err)
	}
	if lim.Cur < uint64(n)+256 {
		tb.Skipf("open-files limit %d is too low for %d connections", lim.Cur, n)
	}
}

// processCPU is the CPU this process has used (user + system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssBytes is this process's resident set size.
func rssBytes(tb testing.TB) int64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc/self/status: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				tb.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	tb.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// loadAverage is the 1-minute load average, reported with each figure
// because the machine is shared.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		return -1
	}
	return f
}

func TestReadLatenciesReadsTheLoadgenStream(t *testing.T) {
	pub := time.Now().Add(-3 * time.Millisecond).UnixNano()
	stream := "retry: 1000\n: stream open\n\n" +
		"id: 2\nevent: text_delta\ndata: {\"seq\":\"2\",\"text_delta\":{\"delta\":\"" + strconv.FormatInt(pub, 10) + "\"}}\n\n" +
		": heartbeat\n\n" +
		"id: 3\nevent: thought\ndata: {\"delta\":\"12\"}\n\n" + // not a text_delta: ignored
		"id: 4\nevent: text_delta\ndata: {\"text_delta\":{\"delta\":\"not a number\"}}\n\n" +
		"id: 5\nevent: complete\ndata: {}\n\n"
	lats, err := readLatencies(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if len(lats) != 1 || lats[0] < 3*time.Millisecond || lats[0] > time.Minute {
		t.Fatalf("latencies %v, want one of about 3ms", lats)
	}
	if _, err := readLatencies(strings.NewReader("id: 1\nevent: text_delta\n")); err == nil {
		t.Fatal("a stream cut before complete: want an error")
	}
	for in, want := range map[string]int64{"0": 0, "1763900000123456789": 1763900000123456789} {
		if n, ok := parseNanos([]byte(in)); !ok || n != want {
			t.Errorf("parseNanos(%q) = %d, %v", in, n, ok)
		}
	}
	for _, in := range []string{"", "-1", "12a", "12345678901234567890"} {
		if _, ok := parseNanos([]byte(in)); ok {
			t.Errorf("parseNanos(%q) accepted", in)
		}
	}
}

func TestWSLatenciesReadsTheLoadgenStream(t *testing.T) {
	t.Parallel()
	pub := time.Now().Add(-3 * time.Millisecond).UnixNano()
	frame := func(op byte, p string) []byte {
		b := []byte{0x80 | op}
		if len(p) <= 125 {
			b = append(b, byte(len(p)))
		} else {
			b = binary.BigEndian.AppendUint16(append(b, 126), uint16(len(p)))
		}
		return append(b, p...)
	}
	var stream []byte
	stream = append(stream, frame(0x1, `{"type":"text_delta","text_delta":{"delta":"`+strconv.FormatInt(pub, 10)+`"}}`)...)
	stream = append(stream, frame(0x9, "1")...)
	stream = append(stream, frame(0x1, `{"type":"thought","x":"`+strings.Repeat("y", 200)+`","delta":"12"}`)...) // not a text_delta: ignored
	stream = append(stream, frame(0x1, `{"type":"complete"}`)...)
	var p wsLatencies
	done := false
	for i := 0; i < len(stream) && !done; i += 7 { // frames split across reads
		var err error
		if done, err = p.feed(stream[i:min(i+7, len(stream))], time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if !done || len(p.lats) != 1 || p.lats[0] < 3*time.Millisecond || p.lats[0] > time.Minute {
		t.Fatalf("done %v, latencies %v: want one of about 3ms", done, p.lats)
	}
	if want := []byte{0x8A, 0x81, 0, 0, 0, 0, '1'}; !bytes.Equal(p.pongs, want) {
		t.Fatalf("pongs % x, want % x", p.pongs, want)
	}
	if _, err := (&wsLatencies{}).feed(frame(0x8, "\x03\xe9"), time.Now()); err == nil {
		t.Fatal("a close before complete: want an error")
	}
}
