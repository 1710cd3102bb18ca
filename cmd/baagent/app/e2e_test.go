package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestQuestionAnsweredEndToEndThroughTheGateway is the suite's acceptance
// path in one process: a run started over the gateway's HTTP API goes
// through the orchestrator (scripted model), context, skills, toolrunner
// (a real sql_query over the sample CSVs) and tokens, and its events arrive
// over SSE with contiguous seq and one terminal event.
func TestQuestionAnsweredEndToEndThroughTheGateway(t *testing.T) {
	cfg := mustLoad(t, testArgs(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := "http://" + startServing(t, ctx, cfg).GatewayHTTPAddr().String()

	body := `{"spec":{"input":"Which product category had the highest revenue last quarter?"}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/runs", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var started struct {
		Run struct {
			RunID string `json:"run_id"`
		} `json:"run"`
	}
	err = json.NewDecoder(resp.Body).Decode(&started)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || started.Run.RunID == "" {
		t.Fatalf("POST /v1/runs: status %d, err %v, run %+v", resp.StatusCode, err, started)
	}

	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/runs/%s/events?cursor=earliest", base, started.Run.RunID), nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("SSE content type %q", ct)
	}
	type envelope struct {
		Seq      string `json:"seq,omitempty"`
		Type     string `json:"type"`
		Complete *struct {
			Content string `json:"content"`
		} `json:"complete,omitempty"`
	}
	var (
		events []envelope
		types  = map[string]int{}
	)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data:") {
			continue
		}
		var e envelope
		if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, "data:"))), &e); err != nil {
			t.Fatalf("bad SSE data %q: %v", line, err)
		}
		if e.Seq == "" { // stream_reset and other control events carry no run seq
			continue
		}
		events = append(events, e)
		types[e.Type]++
	}
	if len(events) == 0 {
		t.Fatal("no events")
	}
	for i, e := range events {
		if e.Seq != fmt.Sprint(i+1) {
			t.Fatalf("event %d has seq %s: not contiguous from 1", i, e.Seq)
		}
	}
	terminal := types["complete"] + types["error"] + types["cancelled"]
	last := events[len(events)-1]
	if terminal != 1 || last.Type != "complete" {
		t.Fatalf("terminal events %v, last %q: want exactly one complete at the end", types, last.Type)
	}
	for _, want := range []string{"start", "act", "observe"} {
		if types[want] == 0 {
			t.Errorf("no %s event (types %v)", want, types)
		}
	}
	if !strings.Contains(last.Complete.Content, "Software") {
		t.Fatalf("answer does not name the top category from the data: %q", last.Complete.Content)
	}
}
