// Package core is the root of the domain rules that more than one service,
// or a service and a client, must apply identically: one leaf package per
// rule, importing only the standard library and the generated API (gen/).
// A rule written twice drifts; a rule written here cannot.
package core
