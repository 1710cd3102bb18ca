// Command toolprovider is an example ToolProvider server: a tool server the
// BA-Agent toolrunner calls over gRPC (proto/baagent/v1/toolprovider.proto).
// Any language with gRPC can implement the two RPCs; this one is in Go, and
// ../node has the same tools in Node.js.
//
// Its tools help business analysis:
//   - convert_currency: converts an amount with a fixed rate table (see
//     rates.go; replace it with -rates-file).
//   - business_days: counts working days between two dates.
//   - add_business_days: the date N working days after (or before) a date.
//
// Register it in the toolrunner's tools file:
//
//	providers:
//	  - name: finance
//	    address: 127.0.0.1:7790
//
// Usage:
//
//	toolprovider [-addr 127.0.0.1:7790] [-rates-file rates.json]
//
// It prints `listening on HOST:PORT` on stdout once it serves (useful with
// -addr 127.0.0.1:0) and stops gracefully on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "toolprovider:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:7790", "gRPC listen address")
	ratesFile := flag.String("rates-file", "", `JSON rate table {"base":"EUR","as_of":"2025-01-02","rates":{"USD":1.03,...}} replacing the built-in one`)
	flag.Parse()

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	rates := defaultRates()
	if *ratesFile != "" {
		r, err := loadRates(*ratesFile)
		if err != nil {
			return err
		}
		rates = r
	}

	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	gs := grpc.NewServer()
	registerProvider(gs, newProvider(rates, log))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	fmt.Printf("listening on %s\n", lis.Addr())
	log.Info("tool provider serving", "addr", lis.Addr().String(), "rates_as_of", rates.AsOf)

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	hs.Shutdown()
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		gs.Stop()
	}
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}
