package retry

import (
	"context"
	"testing"
	"time"
)

func TestDelayDoublesUpToMax(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := b.Delay(i); got != w*time.Millisecond {
			t.Errorf("Delay(%d) = %v, want %v", i, got, w*time.Millisecond)
		}
	}
	if got := (Backoff{}).Delay(100); got != DefaultMax {
		t.Errorf("zero Backoff Delay(100) = %v, want %v", got, DefaultMax)
	}
	if got := (Backoff{Initial: time.Minute, Max: time.Second}).Delay(0); got != time.Minute {
		t.Errorf("Max below Initial: Delay(0) = %v, want Initial", got)
	}
	if got := (Backoff{Initial: time.Second, Max: time.Hour, Multiplier: 1.5}).Delay(2); got != 2250*time.Millisecond {
		t.Errorf("multiplier 1.5: Delay(2) = %v, want 2.25s", got)
	}
}

func TestJitteredStaysWithinItsSpread(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: time.Second, Max: time.Second, Jitter: 0.2}
	seen := map[time.Duration]bool{}
	for range 200 {
		d := b.Jittered(0)
		if d < 800*time.Millisecond || d > 1200*time.Millisecond {
			t.Fatalf("Jittered = %v, want within ±20%% of 1s", d)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Fatal("Jittered returned one value 200 times: no jitter applied")
	}
	if got := (Backoff{Initial: time.Second}).Jittered(0); got != time.Second {
		t.Errorf("no jitter: %v, want 1s", got)
	}
}

func TestSleepStopsWithItsContext(t *testing.T) {
	t.Parallel()
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep of 1ms with a live context reported an interruption")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Error("Sleep with an ended context reported the full delay")
	}
	if Sleep(ctx, 0) {
		t.Error("Sleep(0) with an ended context reported the full delay")
	}
}
