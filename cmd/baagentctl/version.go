package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/baagent/baagent/internal/buildinfo"
)

func runVersion(_ context.Context, c *cli, args []string) error {
	fs := c.flagSet("version", "")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	info := buildinfo.Read()
	if c.json {
		return json.NewEncoder(c.stdout).Encode(info)
	}
	_, err := fmt.Fprintf(c.stdout, "baagentctl %s\n", info)
	return err
}
