// Package nbwrite writes to a socket without blocking: what the socket
// buffer takes now goes out, the rest is left to the caller. The gateway's
// run fan-out uses it to write to many caught-up clients from one
// goroutine (see hub.DirectWriter).
package nbwrite
