package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Output formats of the list commands (-o).
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// outputFlag registers -o/--output on a list command's flag set.
func outputFlag(fs *pflag.FlagSet) *string {
	return fs.StringP("output", "o", outputTable, "output format: table, json or yaml (--json is -o json)")
}

// outputFormat checks -o against --json after parsing: --json means -o json
// and contradicts any other -o given explicitly.
func (c *cli) outputFormat(fs *pflag.FlagSet, format string) (string, error) {
	switch format {
	case outputTable, outputJSON, outputYAML:
	default:
		return "", fmt.Errorf("%w: -o: want table, json or yaml, got %q", errUsage, format)
	}
	if c.json {
		if fs.Changed("output") && format != outputJSON {
			return "", fmt.Errorf("%w: --json and -o %s exclude each other", errUsage, format)
		}
		return outputJSON, nil
	}
	return format, nil
}

// printAs writes m as JSON or YAML, or calls table for the table format.
func (c *cli) printAs(format string, m proto.Message, table func() error) error {
	switch format {
	case outputJSON:
		return c.printProto(m)
	case outputYAML:
		return c.printYAML(m)
	default:
		return table()
	}
}

// printYAML writes m as YAML with the same field names and values as the
// JSON output (the protobuf JSON mapping), in the same field order.
func (c *cli) printYAML(m proto.Message) error {
	b, err := protoYAML(m)
	if err != nil {
		return err
	}
	_, err = c.stdout.Write(b)
	return err
}

// protoYAML converts m's protobuf JSON to block-style YAML with the same
// names, values and field order. The JSON is walked token by token into a
// yaml.Node rather than parsed as YAML text, because the YAML parser
// refuses characters JSON strings may hold raw (DEL, C1 controls); the
// encoder escapes those.
func protoYAML(m proto.Message) ([]byte, error) {
	j, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	doc, err := jsonNode(dec)
	if err != nil {
		return nil, fmt.Errorf("encode YAML: %w", err)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode YAML: %w", err)
	}
	return buf.Bytes(), nil
}

// jsonNode reads one JSON value from dec as a YAML node. Scalars carry
// their JSON type as the tag, so the encoder quotes a string that would
// read back as a number, boolean or null.
func jsonNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if t == '{' {
			n = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		}
		for dec.More() {
			if n.Kind == yaml.MappingNode {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := k.(string)
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key})
			}
			v, err := jsonNode(dec)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, v)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(t.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: t.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t)}, nil
	default: // nil
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
}
