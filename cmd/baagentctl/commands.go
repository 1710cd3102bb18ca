package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// cobraCommand is short for the cobra type the tree is made of.
type cobraCommand = cobra.Command

// runFunc is a command function: it registers its flags with c.flagSet,
// calls c.parse, and does the work with the positional arguments.
type runFunc func(ctx context.Context, c *cli, args []string) error

// spec describes one command of the tree.
type spec struct {
	use, short, long, example string
	run                       runFunc // nil for a group of subcommands
	subs                      []spec
}

// commandSpecs is the command tree; each service issue adds its own entry.
func commandSpecs() []spec {
	return []spec{
		{use: "health [SERVICE...]", short: "Check every service's gRPC health; non-zero exit if any is not SERVING", run: runHealth,
			example: "  baagentctl health\n  baagentctl health gateway tokens --json"},
		{use: "version", short: "Print the client's version", run: runVersion,
			example: "  baagentctl version --json"},
		{use: "ask QUESTION", short: "Ask a question: start a run and stream it live; exit 0 when it completes", run: runAsk,
			long:    "Ask starts a run with the question and streams its events as they happen:\nthoughts, tool calls, observations, the work plan and the answer. When the\nrun asks a question (live view), the answer is read from standard input;\nan empty line lets the question time out. Exit status: 0 completed, 1 failed, 3 cancelled.",
			example: "  baagentctl ask \"Which product category had the highest revenue last quarter?\"\n  baagentctl ask \"q\" --json                 # one event per line, protobuf JSON\n  baagentctl ask \"q\" --plan always --plan-approval ask\n  BAAGENT_API_KEY=dev-key baagentctl ask \"q\" --conversation conv-1"},
		{use: "runs", short: "List, show or cancel runs", subs: []spec{
			{use: "list", short: "List runs, newest first", run: runsList,
				example: "  baagentctl runs list\n  baagentctl runs list --state running,waiting_input -o yaml\n  baagentctl runs list --conversation conv-1 -o json"},
			{use: "get RUN_ID", short: "Show one run, its answer, usage and cost", run: runsGet,
				example: "  baagentctl runs get run-123 --json"},
			{use: "cancel RUN_ID", short: "Cancel a run", run: runsCancel,
				example: "  baagentctl runs cancel run-123 --reason \"wrong question\""},
			runsExportSpec(),
		}},
		{use: "input RUN_ID ANSWER", short: "Answer the question a run waits on", run: runInput,
			example: "  baagentctl input run-123 \"last quarter\"\n  baagentctl input run-123 approve --input-id plan-1"},
		{use: "skills", short: "List, show and manage skills",
			long: "list and show talk to the skills service directly (--skills-addr, env\nBAAGENT_SKILLS_ADDR), as an operator would, so any tenant can be named.\npush, rm, disable, enable and override go through the gateway (--addr, env\nBAAGENT_ADDR) for the API key's tenant (--api-key, env BAAGENT_API_KEY).",
			subs: []spec{
				{use: "list", short: "List the effective skills of a tenant (or every layer with --scope)", run: runSkillsList,
					example: "  baagentctl skills list --tenant acme\n  baagentctl skills list --scope all -o yaml\n  baagentctl skills list --invalid"},
				{use: "show NAME", short: "Show a skill's metadata, instructions or a resource", run: runSkillsShow,
					example: "  baagentctl skills show sales-analysis --level 3\n  baagentctl skills show sales-analysis --resource scripts/query.sql"},
				{use: "validate DIR...", short: "Validate skill folders offline (every violation; exit 1 if any)", run: runSkillsValidate,
					example: "  baagentctl skills validate examples/skills/*"},
				{use: "push DIR|FILE", short: "Upload a skill (folder, SKILL.md, zip, tar or tar.gz)", run: runSkillsPush,
					example: "  baagentctl skills push ./board-brief\n  baagentctl skills push ./board-brief --project north --if-match 3\n  baagentctl skills push ./board-brief/SKILL.md --create"},
				{use: "rm NAME", short: "Delete an uploaded skill", run: runSkillsRm,
					example: "  baagentctl skills rm board-brief --project north"},
				{use: "disable NAME", short: "Disable a system skill for the tenant or a project", run: func(ctx context.Context, c *cli, args []string) error { return runSkillsState(ctx, c, args, true) },
					example: "  baagentctl skills disable data-quality-check"},
				{use: "enable NAME", short: "Enable a disabled system skill again", run: func(ctx context.Context, c *cli, args []string) error { return runSkillsState(ctx, c, args, false) },
					example: "  baagentctl skills enable data-quality-check"},
				{use: "override NAME DIR|FILE", short: "Replace a system skill with your own version", run: runSkillsOverride,
					example: "  baagentctl skills override sales-analysis ./our-sales-analysis"},
			}},
		{use: "tools", short: "List tools, or invoke one (talks to the toolrunner directly)", subs: []spec{
			{use: "list", short: "List the tools the toolrunner offers", run: runToolsList,
				example: "  baagentctl tools list\n  baagentctl tools list --allowed 'sql_*' -o yaml"},
			{use: "invoke NAME", short: "Run a tool and print its observation (non-zero exit when it fails)", run: runToolsInvoke,
				example: "  baagentctl tools invoke sql_query --args '{\"query\":\"SELECT 1\"}'"},
		}},
		{use: "tokens", short: "Count tokens, show model info, encode and decode (tokens service)", subs: []spec{
			{use: "count", short: "Count the tokens of a file or of standard input", run: runTokensCount,
				example: "  baagentctl tokens count --model gpt-4o <<< 'hello world'\n  baagentctl tokens count --model claude-sonnet-4-5 --file README.md"},
			{use: "info MODEL", short: "Show how a model is counted and its metadata", run: runTokensInfo,
				example: "  baagentctl tokens info gpt-4o"},
			{use: "models", short: "List the model registry and the encodings", run: runTokensModels,
				example: "  baagentctl tokens models --json"},
			{use: "encode", short: "Print the token ids of a file or of standard input", run: runTokensEncode,
				example: "  echo hello | baagentctl tokens encode --encoding o200k_base"},
			{use: "decode ID...", short: "Print the text of token ids", run: runTokensDecode,
				example: "  baagentctl tokens decode --model gpt-4o 24912 2375"},
		}},
		{use: "conversations", short: "List, show, read, end or delete conversations", subs: []spec{
			{use: "list", short: "List conversations, newest activity first", run: conversationsList,
				example: "  baagentctl conversations list\n  baagentctl conversations list --page-size 100 -o yaml"},
			{use: "show CONVERSATION_ID", short: "Show one conversation: title, state, runs, activity", run: conversationsShow,
				example: "  baagentctl conversations show conv-1 --json"},
			{use: "history CONVERSATION_ID", short: "Print a conversation's messages, oldest first", run: conversationsHistory,
				example: "  baagentctl conversations history conv-1\n  baagentctl conversations history conv-1 --page-size 1000 --json"},
			{use: "end CONVERSATION_ID", short: "End a conversation: free its workspace and artifacts, keep its history", run: conversationsEnd,
				example: "  baagentctl conversations end conv-1"},
			{use: "rm CONVERSATION_ID", short: "Delete a conversation and everything stored for it (needs --yes)", run: conversationsRm,
				example: "  baagentctl conversations rm conv-1 --yes"},
			conversationsExportSpec(),
		}},
		usageSpec(),
		budgetSpec(),
		mcpSpec(),
		memorySpec(),
		patternsSpec(),
	}
}

// rootCommand builds the command tree. Every command function runs once
// here in declare mode to register its flags on its cobra command, so that
// cobra parses them anywhere on the line and help and completion show them.
func (c *cli) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "baagentctl",
		Short: "Command-line client of the BA-Agent suite",
		Long: "baagentctl talks to the BA-Agent services over gRPC: ask questions and\nfollow runs through the gateway, inspect skills, tools and tokens.\n\n" +
			"Flags may come before or after arguments. Every command prints JSON with\n--json. Exit status: 0 ok, 1 failure (a request failed, a run failed, a\nservice is not serving), 2 usage error, 3 the run was cancelled (ask).",
		Example:       "  baagentctl health\n  baagentctl ask \"Which region grew fastest?\" --json\n  baagentctl runs list -o yaml\n  source <(baagentctl completion bash)",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(c.stdin)
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	c.addFlags(root.PersistentFlags())
	for _, s := range commandSpecs() {
		root.AddCommand(c.build(s))
	}
	// cobra's own completion command (bash, zsh, fish, powershell), made
	// now rather than on Execute so that it can be adjusted: without a shell
	// it is a usage error like every other group.
	root.InitDefaultCompletionCmd()
	for _, cmd := range root.Commands() {
		if cmd.Name() == "completion" {
			cmd.Example = "  source <(baagentctl completion bash)                      # this shell\n" +
				"  baagentctl completion bash > /etc/bash_completion.d/baagentctl\n" +
				"  baagentctl completion zsh > \"${fpath[1]}/_baagentctl\"\n" +
				"  baagentctl completion fish > ~/.config/fish/completions/baagentctl.fish"
			cmd.RunE = c.groupUsage
		}
	}
	return root
}

// groupUsage runs a command that only groups subcommands: called without
// one it prints the usage to stderr and exits 2.
func (c *cli) groupUsage(cmd *cobra.Command, _ []string) error {
	cmd.SetOut(c.stderr)
	_ = cmd.Usage()
	return exitError{exitUsage}
}

func (c *cli) build(s spec) *cobra.Command {
	cmd := &cobra.Command{Use: s.use, Short: s.short, Long: s.long, Example: s.example}
	if s.long == "" {
		cmd.Long = s.short + "."
	}
	if s.run == nil {
		// A group: with no or an unknown subcommand it is a usage error.
		cmd.Args = cobra.NoArgs
		cmd.RunE = c.groupUsage
		for _, sub := range s.subs {
			cmd.AddCommand(c.build(sub))
		}
		return cmd
	}
	c.declaring, c.declTarget = true, cmd.Flags()
	_ = s.run(context.Background(), c, nil)
	c.declaring, c.declTarget = false, nil
	run := s.run
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c.leafFlags = cmd.Flags()
		return run(cmd.Context(), c, args)
	}
	return cmd
}

// normaliseFlags rewrites the single-dash long flags of the old flag
// package (`-json`, `-timeout=5s`) to the double-dash form pflag expects,
// so scripts written for earlier releases keep working. Only names of
// flags the tree knows are rewritten, and nothing after "--".
func normaliseFlags(root *cobra.Command, args []string) []string {
	known := map[string]bool{"help": true}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		add := func(f *pflag.Flag) { known[f.Name] = true }
		cmd.Flags().VisitAll(add)
		cmd.PersistentFlags().VisitAll(add)
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
	out := make([]string, len(args))
	copy(out, args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if len(name) > 1 && known[name] {
			out[i] = "-" + a
		}
	}
	return out
}
