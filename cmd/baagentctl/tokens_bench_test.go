package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Benchmarks of `baagentctl tokens count --file` end to end. Run with
//
//	go test -run '^$' -bench 'TokensCountFile$' -count 6 ./cmd/baagentctl | tee count.txt
//	bin/benchstat -col /impl count.txt
//
// impl=baagent runs the baagentctl binary against a tokens service on
// loopback (in the benchmark's process); impl=tiktoken-go runs a program
// counting the same file with github.com/tiktoken-go/tokenizer
// (testdata/tiktokencount). Both are whole processes: start, read the file,
// count (for tiktoken-go also building its vocabulary), print.

var (
	benchProse = strings.Fields(`the of and to in is that it was for on are as with his they at be this from have or
		by one had not but what all were when we there can an your which their said if do will each about how up out
		them then she many some so these would other into has more her two like him see time could no make than first
		revenue quarter customer growth margin forecast analysis region pipeline tokenizer context window budget
		don't it's we're they've I'm you'll O'Brien naïve café résumé Kubernetes GPT-4o self-hosted state-of-the-art`)
	benchCJK = strings.Fields(`我们 正在 构建 一个 支持 多租户 的 智能体 平台 数据 分析 报告 用户 查询 结果 模型 上下文 窗口
		令牌 计数 服务 部署 性能 测试 文档 系统 架构 设计 实现 优化 缓存 请求 响应 错误 处理 日志 监控 指标 季度 收入`)
	benchCode = []string{
		"func (s *Server) handle(ctx context.Context, req *Request) (*Response, error) {\n\tif err := s.validate(req); err != nil {\n\t\treturn nil, fmt.Errorf(\"handle %s: %w\", req.ID, err)\n\t}\n",
		"\tfor i, item := range items {\n\t\ttotal += item.Price * float64(item.Quantity) // line %d\n\t}\n",
		"def compute(rows):\n    return sum(r[\"amount\"] for r in rows if r.get(\"active\"))\n\n",
		"SELECT region, SUM(revenue) AS total FROM sales WHERE quarter = 'Q3' GROUP BY region ORDER BY total DESC;\n",
		"\treturn &Response{Status: http.StatusOK, Body: buf.Bytes()}, nil\n}\n\n",
	}
)

// mixedFile is n bytes of prose, code, JSON, CJK and numbers, the same on
// every run.
func mixedFile(n int) []byte {
	rng := rand.New(rand.NewPCG(25, 5))
	var b strings.Builder
	b.Grow(n + 1024)
	for b.Len() < n {
		switch rng.IntN(5) {
		case 0: // prose
			for range 40 + rng.IntN(80) {
				b.WriteString(benchProse[rng.IntN(len(benchProse))])
				if rng.IntN(12) == 0 {
					k := rng.IntN(5)
					b.WriteString(",.;!?"[k : k+1])
				}
				b.WriteByte(' ')
			}
			b.WriteString("\n\n")
		case 1: // code
			for range 3 + rng.IntN(6) {
				c := benchCode[rng.IntN(len(benchCode))]
				if strings.Contains(c, "%d") {
					c = fmt.Sprintf(c, rng.IntN(1000))
				}
				b.WriteString(c)
			}
		case 2: // JSON
			fmt.Fprintf(&b, `{"id": "%08x", "user": "u%d", "amount": %d.%02d, "tags": ["%s", "%s"], "ok": %v, "note": "%s"}`+"\n",
				rng.Uint32(), rng.IntN(1e6), rng.IntN(1e5), rng.IntN(100), benchProse[rng.IntN(len(benchProse))],
				benchCJK[rng.IntN(len(benchCJK))], rng.IntN(2) == 0, benchProse[rng.IntN(len(benchProse))])
		case 3: // CJK
			for range 30 + rng.IntN(60) {
				b.WriteString(benchCJK[rng.IntN(len(benchCJK))])
				if rng.IntN(8) == 0 {
					b.WriteString([]string{"，", "。", "、", "：", "！"}[rng.IntN(5)])
				}
			}
			b.WriteString("\n")
		default: // numbers
			for range 5 + rng.IntN(20) {
				fmt.Fprintf(&b, "%d,%d.%03d,%d,%e\n", rng.IntN(1e9), rng.IntN(1e4), rng.IntN(1000), -rng.IntN(1e6), rng.Float64()*1e6)
			}
		}
	}
	s := b.String()[:n]
	for !strings.HasSuffix(s, "\n") { // end on a whole line, valid UTF-8
		s = s[:len(s)-1]
	}
	return []byte(s)
}

// buildTool builds the main package at dir (relative to this package) into
// a temporary directory and returns the binary.
func buildTool(b *testing.B, dir, name string) string {
	b.Helper()
	gobin, err := exec.LookPath("go") // go test puts its own go first in PATH
	if err != nil {
		b.Skipf("no go command to build %s: %v", dir, err)
	}
	out := filepath.Join(b.TempDir(), name)
	cmd := exec.Command(gobin, "build", "-o", out, dir)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build %s: %v\n%s", dir, err, msg)
	}
	return out
}

// runCount runs a counting command and returns the count it printed and
// the CPU time the process used.
func runCount(b *testing.B, bin string, args ...string) (int, time.Duration) {
	cmd := exec.Command(bin, args...)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		b.Fatalf("%s %v: %v\n%s", bin, args, err, stderr)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		b.Fatalf("%s printed %q", bin, out)
	}
	return n, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// countLoop runs count in b.Loop and reports the tokens counted and the CPU
// time per operation: the command's process and, with the service in
// this process (service true), this process's too. On a machine busy with
// other work the CPU time is the steadier figure: wall time also holds the
// waits for a core.
func countLoop(b *testing.B, size int, service bool, count func() (int, time.Duration)) {
	b.SetBytes(int64(size))
	n, cmdCPU := 0, time.Duration(0)
	self := selfCPU()
	for b.Loop() {
		var c time.Duration
		n, c = count()
		cmdCPU += c
	}
	cpu := cmdCPU
	if service && self >= 0 {
		cpu += selfCPU() - self
		b.ReportMetric(float64(cmdCPU.Microseconds())/1e3/float64(b.N), "cmd-cpu-ms/op")
	}
	b.ReportMetric(float64(n), "tokens")
	b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
}

// BenchmarkTokensCountFile counts a 5 MB mixed file with the baagentctl
// process through the tokens service, and with a tiktoken-go process, in
// the same run (see the comment at the top of the file).
func BenchmarkTokensCountFile(b *testing.B) {
	data := mixedFile(5_000_000)
	file := filepath.Join(b.TempDir(), "mixed.txt")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		b.Fatal(err)
	}
	addr := startTokens(b)
	ctl := buildTool(b, ".", "baagentctl")
	tk := buildTool(b, "./testdata/tiktokencount", "tiktokencount")
	b.Run("impl=baagent", func(b *testing.B) {
		countLoop(b, len(data), true, func() (int, time.Duration) {
			return runCount(b, ctl, addr, "tokens", "count", "--model", "gpt-4o", "--file", file)
		})
	})
	// BAAGENTCTL_BEFORE names another baagentctl binary (an earlier
	// version, which sent the file in one CountTokens message) to run on
	// the same file against the same service as impl=before.
	if before := os.Getenv("BAAGENTCTL_BEFORE"); before != "" {
		b.Run("impl=before", func(b *testing.B) {
			countLoop(b, len(data), true, func() (int, time.Duration) {
				return runCount(b, before, addr, "tokens", "count", "--model", "gpt-4o", "--file", file)
			})
		})
	}
	b.Run("impl=tiktoken-go", func(b *testing.B) {
		countLoop(b, len(data), false, func() (int, time.Duration) {
			return runCount(b, tk, file)
		})
	})
}

// BenchmarkTokensCountFileInProcess is the baagent side without starting a
// process: the CLI's run function and the service in one process, for
// profiling (-cpuprofile).
func BenchmarkTokensCountFileInProcess(b *testing.B) {
	data := mixedFile(5_000_000)
	file := filepath.Join(b.TempDir(), "mixed.txt")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		b.Fatal(err)
	}
	addr := startTokens(b)
	ctx := context.Background()
	getenv := func(string) string { return "" }
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if code := run(ctx, []string{addr, "tokens", "count", "--model", "gpt-4o", "--file", file}, strings.NewReader(""), io.Discard, io.Discard, getenv); code != 0 {
			b.Fatalf("exit %d", code)
		}
	}
}
