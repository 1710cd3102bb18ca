package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// The memory commands (docs/concepts/memory.md), through the gateway for
// the API key's tenant.

// maxMemoryEpisodeBytes is the memory service's limit on an episode's text.
const maxMemoryEpisodeBytes = 64 << 10

func memorySpec() spec {
	return spec{use: "memory", short: "Search, add to and inspect the tenant's memory (knowledge graph)",
		long: "memory talks to the gateway (--addr, env BAAGENT_ADDR) for the API key's\ntenant (--api-key, env BAAGENT_API_KEY): episodes are what was remembered\n(finished runs, text you add), entities and relations what the model made of\nthem, searched by vector, keyword and graph retrieval fused together.",
		subs: []spec{
			{use: "search QUERY", short: "Recall entities by hybrid retrieval, best first", run: memorySearch,
				example: "  baagentctl memory search \"north region revenue\"\n  baagentctl memory search \"q3\" --mode keyword --top-k 5 --type Metric -o json"},
			{use: "add [TEXT]", short: "Remember text (an argument, --file, or standard input)", run: memoryAdd,
				example: "  baagentctl memory add \"Acme's fiscal year starts in April.\" --wait\n  baagentctl memory add --file notes.md --conversation conv-1"},
			{use: "episodes", short: "List, show or delete episodes", subs: []spec{
				{use: "list", short: "List episodes, newest first", run: memoryEpisodesList,
					example: "  baagentctl memory episodes list\n  baagentctl memory episodes list --status failed -o yaml"},
				{use: "show EPISODE_ID", short: "Show an episode and the entities it mentions", run: memoryEpisodesShow,
					example: "  baagentctl memory episodes show ep_01HZX3 -o json"},
				{use: "rm EPISODE_ID", short: "Delete an episode and what only it supported (needs --yes)", run: memoryEpisodesRm,
					example: "  baagentctl memory episodes rm ep_01HZX3 --yes"},
			}},
			{use: "entities", short: "List, show or delete entities", subs: []spec{
				{use: "list", short: "List entities by name", run: memoryEntitiesList,
					example: "  baagentctl memory entities list --type Person\n  baagentctl memory entities list --prefix nor -o json"},
				{use: "show ENTITY_ID", short: "Show an entity, its relations, community and episodes", run: memoryEntitiesShow,
					example: "  baagentctl memory entities show en_01HZX3"},
				{use: "rm ENTITY_ID", short: "Delete an entity and its relations (needs --yes)", run: memoryEntitiesRm,
					example: "  baagentctl memory entities rm en_01HZX3 --yes"},
			}},
			{use: "graph ENTITY_ID", short: "Print an entity's neighbourhood: entities and relations", run: memoryGraph,
				example: "  baagentctl memory graph en_01HZX3 --depth 2 --max-nodes 30\n  baagentctl memory graph en_01HZX3 -o json"},
			{use: "stats", short: "Count the tenant's episodes, entities, relations and communities", run: memoryStats,
				example: "  baagentctl memory stats -o yaml"},
			{use: "settings", short: "Read or change the tenant's memory switches", subs: []spec{
				{use: "get", short: "Show the memory switches (and one conversation's capture)", run: memorySettingsGet,
					example: "  baagentctl memory settings get\n  baagentctl memory settings get --conversation conv-1"},
				{use: "set", short: "Change the memory switches, tenant-wide or for one conversation", run: memorySettingsSet,
					example: "  baagentctl memory settings set --capture-runs=false\n  baagentctl memory settings set --conversation conv-1 --capture=false\n  baagentctl memory settings set --patterns=false\n  baagentctl memory settings set --conversation conv-1 --conversation-patterns=false"},
			}},
		}}
}

// memoryFlags parses a memory command's flags: the gateway's, -o, and what
// more adds; nargs is the number of positional arguments wanted (-1: any).
func (c *cli) memoryFlags(name, argName string, args []string, nargs int, more func(fs *pflag.FlagSet)) (*pflag.FlagSet, runFlags, string, error) {
	fs := c.flagSet(name, argName)
	var rf runFlags
	c.addRunFlags(fs, &rf)
	output := outputFlag(fs)
	if more != nil {
		more(fs)
	}
	if err := c.parse(fs, args); err != nil {
		return nil, rf, "", err
	}
	format, err := c.outputFormat(fs, *output)
	if err != nil {
		return nil, rf, "", err
	}
	switch {
	case nargs >= 0 && fs.NArg() > nargs:
		return nil, rf, "", fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(nargs))
	case nargs > 0 && fs.NArg() < nargs:
		return nil, rf, "", fmt.Errorf("%w: missing %s", errUsage, argName)
	}
	return fs, rf, format, nil
}

// memoryCall runs one gateway call with the command's flags and prints its
// answer as -o asks, the table with table.
func memoryCall[Resp proto.Message](ctx context.Context, c *cli, rf runFlags, format, what string,
	call func(context.Context, *gatewayClient) (Resp, error), table func(Resp) error) error {
	ctx, gw, release, err := c.gatewayCall(ctx, rf)
	if err != nil {
		return err
	}
	defer release()
	resp, err := call(ctx, gw)
	if err != nil {
		return c.rpcError(what, err)
	}
	return c.printAs(format, resp, func() error { return table(resp) })
}

func memorySearch(ctx context.Context, c *cli, args []string) error {
	var mode string
	var topK int
	var types string
	fs, rf, format, err := c.memoryFlags("memory search", "QUERY", args, -1, func(fs *pflag.FlagSet) {
		fs.StringVar(&mode, "mode", "hybrid", "retrieval: hybrid, vector, keyword or graph")
		fs.IntVar(&topK, "top-k", 0, "results (default 10, at most 100)")
		fs.StringVar(&types, "type", "", "only entities of these types, comma-separated (Person,Metric)")
	})
	if err != nil {
		return err
	}
	query := strings.TrimSpace(strings.Join(fs.Args(), " "))
	if query == "" {
		return fmt.Errorf("%w: missing QUERY", errUsage)
	}
	m, ok := baagentv1.SearchMode_value["SEARCH_MODE_"+strings.ToUpper(mode)]
	if !ok || m == 0 {
		return fmt.Errorf("%w: --mode: want hybrid, vector, keyword or graph, got %q", errUsage, mode)
	}
	req := &baagentv1.GatewayServiceSearchMemoryRequest{Query: query, Mode: baagentv1.SearchMode(m), TopK: clampInt32(topK)}
	for _, t := range strings.Split(types, ",") {
		if t = strings.TrimSpace(t); t != "" {
			req.EntityTypes = append(req.EntityTypes, t)
		}
	}
	return memoryCall(ctx, c, rf, format, "search memory", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceSearchMemoryResponse, error) {
		return gw.SearchMemory(ctx, req)
	}, func(resp *baagentv1.GatewayServiceSearchMemoryResponse) error {
		if len(resp.GetHits()) == 0 {
			fmt.Fprintf(c.stdout, "nothing recalled for %q\n", query)
			return nil
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RANK\tSCORE\tENTITY_ID\tTYPE\tNAME\tCHANNELS\tSUMMARY")
		for i, h := range resp.GetHits() {
			var ch []string
			for _, r := range h.GetChannels() {
				ch = append(ch, fmt.Sprintf("%s#%d", r.GetChannel(), r.GetRank()))
			}
			e := h.GetEntity()
			fmt.Fprintf(tw, "%d\t%.4f\t%s\t%s\t%s\t%s\t%s\n", i+1, h.GetScore(), e.GetId(), e.GetType(), e.GetName(), strings.Join(ch, ","), shorten(e.GetSummary(), 60))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "\nembedding: %s\n", resp.GetEmbeddingModel())
		return nil
	})
}

func memoryAdd(ctx context.Context, c *cli, args []string) error {
	var file, conversation, key string
	var wait bool
	fs, rf, format, err := c.memoryFlags("memory add", "TEXT", args, -1, func(fs *pflag.FlagSet) {
		fs.StringVar(&file, "file", "", "read the text from this file (- or none: standard input, when no TEXT is given)")
		fs.StringVar(&conversation, "conversation", "", "conversation the text belongs to")
		fs.StringVar(&key, "idempotency-key", "", "a repeated add with the same key returns the first episode")
		fs.BoolVar(&wait, "wait", false, "answer once the episode is processed into entities (or failed)")
	})
	if err != nil {
		return err
	}
	text := strings.Join(fs.Args(), " ")
	switch {
	case text != "" && file != "":
		return fmt.Errorf("%w: give the TEXT or --file, not both", errUsage)
	case text == "":
		if file == "-" {
			file = ""
		}
		if text, err = c.readInput(file, maxMemoryEpisodeBytes); err != nil {
			return err
		}
	}
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("%w: nothing to remember: give TEXT, --file or standard input", errUsage)
	}
	req := &baagentv1.GatewayServiceAddMemoryEpisodeRequest{Content: text, ConversationId: conversation, Wait: wait, IdempotencyKey: key}
	return memoryCall(ctx, c, rf, format, "add to memory", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceAddMemoryEpisodeResponse, error) {
		return gw.AddMemoryEpisode(ctx, req)
	}, func(resp *baagentv1.GatewayServiceAddMemoryEpisodeResponse) error {
		if resp.GetSkipped() {
			fmt.Fprintln(c.stdout, "not stored: memory is switched off for this tenant or conversation (baagentctl memory settings get)")
			return nil
		}
		ep := resp.GetEpisode()
		fmt.Fprintf(c.stdout, "episode %s %s", ep.GetId(), episodeStatusName(ep.GetStatus()))
		if n := len(ep.GetEntityIds()); n > 0 {
			fmt.Fprintf(c.stdout, ", %d entities", n)
		}
		if ep.GetRedactions() > 0 {
			fmt.Fprintf(c.stdout, ", %d personal data or secret spans redacted", ep.GetRedactions())
		}
		if ep.GetError() != "" {
			fmt.Fprintf(c.stdout, ": %s", ep.GetError())
		}
		fmt.Fprintln(c.stdout)
		return nil
	})
}

func episodeStatusName(s baagentv1.EpisodeStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "EPISODE_STATUS_"))
}

func episodeSourceName(s baagentv1.EpisodeSource) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "EPISODE_SOURCE_"))
}

func memoryEpisodesList(ctx context.Context, c *cli, args []string) error {
	var conversation, state, pageToken string
	var pageSize int
	_, rf, format, err := c.memoryFlags("memory episodes list", "", args, 0, func(fs *pflag.FlagSet) {
		fs.StringVar(&conversation, "conversation", "", "only this conversation's episodes")
		fs.StringVar(&state, "status", "", "only episodes in this state: pending, processing, synced or failed")
		fs.IntVar(&pageSize, "page-size", 0, "episodes per page (default 50, at most 500)")
		fs.StringVar(&pageToken, "page-token", "", "page token printed by a previous list")
	})
	if err != nil {
		return err
	}
	req := &baagentv1.GatewayServiceListMemoryEpisodesRequest{ConversationId: conversation, PageSize: clampInt32(pageSize), PageToken: pageToken}
	if state != "" {
		n, ok := baagentv1.EpisodeStatus_value["EPISODE_STATUS_"+strings.ToUpper(state)]
		if !ok || n == 0 {
			return fmt.Errorf("%w: --status: want pending, processing, synced or failed, got %q", errUsage, state)
		}
		req.Status = baagentv1.EpisodeStatus(n)
	}
	return memoryCall(ctx, c, rf, format, "list memory episodes", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceListMemoryEpisodesResponse, error) {
		return gw.ListMemoryEpisodes(ctx, req)
	}, func(resp *baagentv1.GatewayServiceListMemoryEpisodesResponse) error {
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EPISODE_ID\tSTATUS\tSOURCE\tCREATED\tENTITIES\tCONVERSATION\tCONTENT")
		for _, ep := range resp.GetEpisodes() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", ep.GetId(), episodeStatusName(ep.GetStatus()), episodeSourceName(ep.GetSource()),
				localTime(ep.GetCreatedAt(), time.DateTime), len(ep.GetEntityIds()), ep.GetConversationId(), shorten(ep.GetContent(), 60))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if t := resp.GetNextPageToken(); t != "" {
			fmt.Fprintf(c.stdout, "\nmore: baagentctl memory episodes list --page-token %s\n", t)
		}
		return nil
	})
}

// clampInt32 keeps a flag's int within int32 (the gateway checks the range).
func clampInt32(n int) int32 {
	return int32(min(max(n, -1), 1<<30)) //nolint:gosec // clamped
}

func memoryEpisodesShow(ctx context.Context, c *cli, args []string) error {
	fs, rf, format, err := c.memoryFlags("memory episodes show", "EPISODE_ID", args, 1, nil)
	if err != nil {
		return err
	}
	id := fs.Arg(0)
	return memoryCall(ctx, c, rf, format, "get memory episode", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceGetMemoryEpisodeResponse, error) {
		return gw.GetMemoryEpisode(ctx, &baagentv1.GatewayServiceGetMemoryEpisodeRequest{Id: id})
	}, func(resp *baagentv1.GatewayServiceGetMemoryEpisodeResponse) error {
		ep := resp.GetEpisode()
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		row := func(k, v string) {
			if v != "" {
				fmt.Fprintf(tw, "%s\t%s\n", k, v)
			}
		}
		row("episode", ep.GetId())
		row("status", episodeStatusName(ep.GetStatus()))
		row("error", ep.GetError())
		row("source", episodeSourceName(ep.GetSource()))
		row("conversation", ep.GetConversationId())
		row("run", ep.GetRunId())
		row("created", localTime(ep.GetCreatedAt(), time.RFC3339))
		row("processed", localTime(ep.GetProcessedAt(), time.RFC3339))
		if ep.GetRedactions() > 0 {
			row("redactions", fmt.Sprint(ep.GetRedactions()))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "\n%s\n", ep.GetContent())
		if len(resp.GetEntities()) > 0 {
			fmt.Fprintln(c.stdout, "\nentities:")
			c.printEntities(resp.GetEntities())
		}
		return nil
	})
}

// confirmArg parses a delete command: one id and --yes.
func (c *cli) confirmArg(name, argName, what string, args []string) (string, runFlags, string, error) {
	var yes bool
	fs, rf, format, err := c.memoryFlags(name, argName, args, 1, func(fs *pflag.FlagSet) {
		fs.BoolVar(&yes, "yes", false, "confirm the deletion, which cannot be undone")
	})
	if err != nil {
		return "", rf, "", err
	}
	if !yes {
		return "", rf, "", fmt.Errorf("%w: deleting %s %s cannot be undone; add --yes to confirm", errUsage, what, fs.Arg(0))
	}
	return fs.Arg(0), rf, format, nil
}

func memoryEpisodesRm(ctx context.Context, c *cli, args []string) error {
	id, rf, format, err := c.confirmArg("memory episodes rm", "EPISODE_ID", "episode", args)
	if err != nil {
		return err
	}
	return memoryCall(ctx, c, rf, format, "delete memory episode", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceDeleteMemoryEpisodeResponse, error) {
		return gw.DeleteMemoryEpisode(ctx, &baagentv1.GatewayServiceDeleteMemoryEpisodeRequest{Id: id})
	}, func(resp *baagentv1.GatewayServiceDeleteMemoryEpisodeResponse) error {
		fmt.Fprintf(c.stdout, "episode %s deleted: %d entities and %d relations no other episode supported went with it\n",
			id, resp.GetEntitiesRemoved(), resp.GetRelationsRemoved())
		return nil
	})
}

func (c *cli) printEntities(entities []*baagentv1.Entity) {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENTITY_ID\tTYPE\tNAME\tMENTIONS\tCOMMUNITY\tSUMMARY")
	for _, e := range entities {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", e.GetId(), e.GetType(), e.GetName(), e.GetMentionCount(), e.GetCommunityId(), shorten(e.GetSummary(), 60))
	}
	_ = tw.Flush()
}

func memoryEntitiesList(ctx context.Context, c *cli, args []string) error {
	var typ, prefix, pageToken string
	var pageSize int
	_, rf, format, err := c.memoryFlags("memory entities list", "", args, 0, func(fs *pflag.FlagSet) {
		fs.StringVar(&typ, "type", "", "only entities of this type (Person, Organization, Metric…)")
		fs.StringVar(&prefix, "prefix", "", "only names starting with this (case-insensitive)")
		fs.IntVar(&pageSize, "page-size", 0, "entities per page (default 50, at most 500)")
		fs.StringVar(&pageToken, "page-token", "", "page token printed by a previous list")
	})
	if err != nil {
		return err
	}
	req := &baagentv1.GatewayServiceListMemoryEntitiesRequest{Type: typ, NamePrefix: prefix, PageSize: clampInt32(pageSize), PageToken: pageToken}
	return memoryCall(ctx, c, rf, format, "list memory entities", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceListMemoryEntitiesResponse, error) {
		return gw.ListMemoryEntities(ctx, req)
	}, func(resp *baagentv1.GatewayServiceListMemoryEntitiesResponse) error {
		c.printEntities(resp.GetEntities())
		if t := resp.GetNextPageToken(); t != "" {
			fmt.Fprintf(c.stdout, "\nmore: baagentctl memory entities list --page-token %s\n", t)
		}
		return nil
	})
}

// relationLine is one relation as text: `A —WORKS_FOR→ B (0.90): fact`.
func relationLine(r *baagentv1.Relation, names map[string]string) string {
	name := func(id string) string {
		if n, ok := names[id]; ok && n != "" {
			return n
		}
		return id
	}
	line := fmt.Sprintf("%s —%s→ %s (%.2f)", name(r.GetSourceId()), r.GetType(), name(r.GetTargetId()), r.GetWeight())
	if f := r.GetFact(); f != "" {
		line += ": " + shorten(f, 100)
	}
	return line
}

func memoryEntitiesShow(ctx context.Context, c *cli, args []string) error {
	fs, rf, format, err := c.memoryFlags("memory entities show", "ENTITY_ID", args, 1, nil)
	if err != nil {
		return err
	}
	id := fs.Arg(0)
	return memoryCall(ctx, c, rf, format, "get memory entity", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceGetMemoryEntityResponse, error) {
		return gw.GetMemoryEntity(ctx, &baagentv1.GatewayServiceGetMemoryEntityRequest{Id: id})
	}, func(resp *baagentv1.GatewayServiceGetMemoryEntityResponse) error {
		e := resp.GetEntity()
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		row := func(k, v string) {
			if v != "" {
				fmt.Fprintf(tw, "%s\t%s\n", k, v)
			}
		}
		row("entity", e.GetId())
		row("name", e.GetName())
		row("type", e.GetType())
		row("summary", e.GetSummary())
		row("aliases", strings.Join(e.GetAliases(), ", "))
		row("mentions", fmt.Sprint(e.GetMentionCount()))
		keys := make([]string, 0, len(e.GetAttributes()))
		for k := range e.GetAttributes() {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			row("  "+k, e.GetAttributes()[k])
		}
		if co := resp.GetCommunity(); co != nil {
			row("community", fmt.Sprintf("%s (%s, %d members)", co.GetName(), co.GetId(), co.GetMemberCount()))
		}
		row("updated", localTime(e.GetUpdatedAt(), time.RFC3339))
		if err := tw.Flush(); err != nil {
			return err
		}
		names := map[string]string{e.GetId(): e.GetName()}
		for k, v := range resp.GetRelatedNames() {
			names[k] = v
		}
		if len(resp.GetRelations()) > 0 {
			fmt.Fprintln(c.stdout, "\nrelations:")
			for _, r := range resp.GetRelations() {
				fmt.Fprintf(c.stdout, "  %s\n", relationLine(r, names))
			}
		}
		if len(resp.GetEpisodes()) > 0 {
			fmt.Fprintln(c.stdout, "\nepisodes:")
			for _, ep := range resp.GetEpisodes() {
				fmt.Fprintf(c.stdout, "  %s  %s  %s\n", ep.GetId(), localTime(ep.GetCreatedAt(), time.DateTime), shorten(ep.GetContent(), 80))
			}
		}
		return nil
	})
}

func memoryEntitiesRm(ctx context.Context, c *cli, args []string) error {
	id, rf, format, err := c.confirmArg("memory entities rm", "ENTITY_ID", "entity", args)
	if err != nil {
		return err
	}
	return memoryCall(ctx, c, rf, format, "delete memory entity", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceDeleteMemoryEntityResponse, error) {
		return gw.DeleteMemoryEntity(ctx, &baagentv1.GatewayServiceDeleteMemoryEntityRequest{Id: id})
	}, func(resp *baagentv1.GatewayServiceDeleteMemoryEntityResponse) error {
		fmt.Fprintf(c.stdout, "entity %s deleted with %d relations\n", id, resp.GetRelationsRemoved())
		return nil
	})
}

func memoryGraph(ctx context.Context, c *cli, args []string) error {
	var depth, maxNodes int
	fs, rf, format, err := c.memoryFlags("memory graph", "ENTITY_ID", args, 1, func(fs *pflag.FlagSet) {
		fs.IntVar(&depth, "depth", 0, "hops from the entity (default 1, at most 3)")
		fs.IntVar(&maxNodes, "max-nodes", 0, "most entities (default 50, at most 500); the strongest paths are kept")
	})
	if err != nil {
		return err
	}
	req := &baagentv1.GatewayServiceGetMemoryGraphRequest{EntityId: fs.Arg(0), Depth: clampInt32(depth), MaxNodes: clampInt32(maxNodes)}
	return memoryCall(ctx, c, rf, format, "read memory graph", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceGetMemoryGraphResponse, error) {
		return gw.GetMemoryGraph(ctx, req)
	}, func(resp *baagentv1.GatewayServiceGetMemoryGraphResponse) error {
		c.printEntities(resp.GetEntities())
		names := map[string]string{}
		for _, e := range resp.GetEntities() {
			names[e.GetId()] = e.GetName()
		}
		if len(resp.GetRelations()) > 0 {
			fmt.Fprintln(c.stdout, "\nrelations:")
			for _, r := range resp.GetRelations() {
				fmt.Fprintf(c.stdout, "  %s\n", relationLine(r, names))
			}
		}
		if len(resp.GetCommunities()) > 0 {
			fmt.Fprintln(c.stdout, "\ncommunities:")
			for _, co := range resp.GetCommunities() {
				fmt.Fprintf(c.stdout, "  %s  %s (%d members): %s\n", co.GetId(), co.GetName(), co.GetMemberCount(), shorten(co.GetSummary(), 100))
			}
		}
		if resp.GetTruncated() {
			fmt.Fprintln(c.stdout, "\n(truncated: raise --max-nodes to see more)")
		}
		return nil
	})
}

func memoryStats(ctx context.Context, c *cli, args []string) error {
	_, rf, format, err := c.memoryFlags("memory stats", "", args, 0, nil)
	if err != nil {
		return err
	}
	return memoryCall(ctx, c, rf, format, "read memory stats", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceGetMemoryStatsResponse, error) {
		return gw.GetMemoryStats(ctx, &baagentv1.GatewayServiceGetMemoryStatsRequest{})
	}, func(resp *baagentv1.GatewayServiceGetMemoryStatsResponse) error {
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "episodes\t%d (%d pending, %d failed)\n", resp.GetEpisodes(), resp.GetEpisodesPending(), resp.GetEpisodesFailed())
		fmt.Fprintf(tw, "entities\t%d\n", resp.GetEntities())
		fmt.Fprintf(tw, "relations\t%d\n", resp.GetRelations())
		fmt.Fprintf(tw, "communities\t%d\n", resp.GetCommunities())
		if ts := localTime(resp.GetCommunitiesUpdatedAt(), time.RFC3339); ts != "" {
			fmt.Fprintf(tw, "communities updated\t%s\n", ts)
		}
		fmt.Fprintf(tw, "backend\t%s\n", resp.GetBackend())
		fmt.Fprintf(tw, "embedding\t%s\n", resp.GetEmbeddingModel())
		return tw.Flush()
	})
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func (c *cli) printMemorySettings(s *baagentv1.MemorySettings) {
	fmt.Fprintf(c.stdout, "capture runs: %s\nmemory tools: %s\n", onOff(s.GetCaptureRuns()), onOff(s.GetToolsEnabled()))
	if l := s.GetCaptureDisabledConversations(); len(l) > 0 {
		fmt.Fprintf(c.stdout, "not captured: %s\n", strings.Join(l, ", "))
	}
	fmt.Fprintf(c.stdout, "patterns: %s\n", onOff(s.GetPatternsEnabled()))
	if l := s.GetPatternsDisabledConversations(); len(l) > 0 {
		fmt.Fprintf(c.stdout, "no patterns: %s\n", strings.Join(l, ", "))
	}
}

func memorySettingsGet(ctx context.Context, c *cli, args []string) error {
	var conversation string
	_, rf, format, err := c.memoryFlags("memory settings get", "", args, 0, func(fs *pflag.FlagSet) {
		fs.StringVar(&conversation, "conversation", "", "also say whether this conversation's runs are captured")
	})
	if err != nil {
		return err
	}
	return memoryCall(ctx, c, rf, format, "read memory settings", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceGetMemorySettingsResponse, error) {
		return gw.GetMemorySettings(ctx, &baagentv1.GatewayServiceGetMemorySettingsRequest{ConversationId: conversation})
	}, func(resp *baagentv1.GatewayServiceGetMemorySettingsResponse) error {
		c.printMemorySettings(resp.GetSettings())
		if conversation != "" {
			fmt.Fprintf(c.stdout, "conversation %s captured: %s\n", conversation, onOff(resp.GetCaptureEffective()))
			fmt.Fprintf(c.stdout, "conversation %s patterns: %s\n", conversation, onOff(resp.GetPatternsEffective()))
		}
		return nil
	})
}

var errNothingToSet = errors.New("nothing to change: give --capture-runs, --tools, --patterns, or --conversation with --capture or --conversation-patterns")

func memorySettingsSet(ctx context.Context, c *cli, args []string) error {
	var captureRuns, tools, capture, pats, convPats bool
	var conversation string
	fs, rf, format, err := c.memoryFlags("memory settings set", "", args, 0, func(fs *pflag.FlagSet) {
		fs.BoolVar(&captureRuns, "capture-runs", false, "tenant-wide: finished runs become episodes")
		fs.BoolVar(&tools, "tools", false, "tenant-wide: the model is offered memory_search and memory_add")
		fs.StringVar(&conversation, "conversation", "", "the conversation --capture applies to")
		fs.BoolVar(&capture, "capture", false, "with --conversation: whether its runs are captured")
		fs.BoolVar(&pats, "patterns", false, "tenant-wide: interaction patterns are learned from runs and offered to them")
		fs.BoolVar(&convPats, "conversation-patterns", false, "with --conversation: whether its runs learn and are offered patterns")
	})
	if err != nil {
		return err
	}
	req := &baagentv1.GatewayServiceUpdateMemorySettingsRequest{ConversationId: conversation}
	if fs.Changed("capture-runs") {
		req.CaptureRuns = &captureRuns
	}
	if fs.Changed("tools") {
		req.ToolsEnabled = &tools
	}
	if fs.Changed("patterns") {
		req.PatternsEnabled = &pats
	}
	if fs.Changed("capture") {
		if conversation == "" {
			return fmt.Errorf("%w: --capture needs --conversation", errUsage)
		}
		req.ConversationCapture = &capture
	}
	if fs.Changed("conversation-patterns") {
		if conversation == "" {
			return fmt.Errorf("%w: --conversation-patterns needs --conversation", errUsage)
		}
		req.ConversationPatterns = &convPats
	}
	if conversation != "" && req.ConversationCapture == nil && req.ConversationPatterns == nil {
		return fmt.Errorf("%w: --conversation needs --capture or --conversation-patterns (=true or =false)", errUsage)
	}
	if req.CaptureRuns == nil && req.ToolsEnabled == nil && req.PatternsEnabled == nil && req.ConversationCapture == nil && req.ConversationPatterns == nil {
		return fmt.Errorf("%w: %w", errUsage, errNothingToSet)
	}
	return memoryCall(ctx, c, rf, format, "change memory settings", func(ctx context.Context, gw *gatewayClient) (*baagentv1.GatewayServiceUpdateMemorySettingsResponse, error) {
		return gw.UpdateMemorySettings(ctx, req)
	}, func(resp *baagentv1.GatewayServiceUpdateMemorySettingsResponse) error {
		c.printMemorySettings(resp.GetSettings())
		return nil
	})
}
