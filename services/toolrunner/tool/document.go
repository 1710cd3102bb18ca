package tool

import baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"

// Document is a Result.Data for a tool that renders its own output (numbered
// file lines, a table of rows). The pipeline shows Brief at BRIEF and Text at
// STANDARD (then truncates it), and stores Text as the artifact at FULL or
// when it is large. Any other Data gets the generic formatting of
// lists, objects and text.
type Document struct {
	// Text is the complete output.
	Text string
	// Brief is the key facts in one line (`Read 120 lines of orders.csv`).
	Brief string
	// Summary describes the output when it is stored as an artifact
	// (data_summary); empty uses Brief.
	Summary string
	// Recall, set by memory_search, is what the search recalled, carried
	// structured to the caller in ToolExecutionResult.memory_hits (the
	// orchestrator's memory_recalled event); nil for every other tool.
	Recall *Recall
}

// Recall is the structured side of a memory_search result.
type Recall struct {
	// Hits are the recalled entities, best first: id, name, type and the
	// fused score.
	Hits []*baagentv1.SearchHit
}
