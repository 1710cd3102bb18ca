package tokens

import (
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// Edge validation of every TokensService request. Each function returns nil
// or an InvalidArgument status naming every offending field.

func (s *Server) validateCountTokens(req *baagentv1.CountTokensRequest) error {
	var e validate.Errors
	validate.Model(&e, "model", req.GetModel())
	validate.Text(&e, "text", req.GetText(), s.opts.MaxTextBytes)
	return e.Err()
}

func (s *Server) validateCountMessages(req *baagentv1.CountMessagesRequest) error {
	var e validate.Errors
	validate.Model(&e, "model", req.GetModel())
	validate.MaxItems(&e, "messages", len(req.GetMessages()), s.opts.MaxMessages)
	validate.ChatMessages(&e, "messages", req.GetMessages(), s.opts.MaxTextBytes)
	validate.ToolSchemas(&e, "tools", req.GetTools())
	return e.Err()
}

func (s *Server) validateEncode(req *baagentv1.EncodeRequest) error {
	var e validate.Errors
	encoder(&e, req.GetEncoder())
	validate.Text(&e, "text", req.GetText(), s.opts.MaxTextBytes)
	return e.Err()
}

func (s *Server) validateDecode(req *baagentv1.DecodeRequest) error {
	var e validate.Errors
	encoder(&e, req.GetEncoder())
	validate.MaxItems(&e, "tokens", len(req.GetTokens()), s.opts.MaxTokenIDs)
	return e.Err()
}

func (s *Server) validateGetModelInfo(req *baagentv1.GetModelInfoRequest) error {
	var e validate.Errors
	validate.Model(&e, "model", req.GetModel())
	return e.Err()
}

// encoder checks the `encoder` oneof of EncodeRequest and DecodeRequest: one
// of model (a model name) or encoding_name (an identifier such as
// `cl100k_base`) is required. Whether the encoding exists is decided by the
// encoder registry, not here.
func encoder(e *validate.Errors, oneof any) {
	switch enc := oneof.(type) {
	case *baagentv1.EncodeRequest_Model:
		if enc != nil {
			validate.Model(e, "model", enc.Model)
			return
		}
	case *baagentv1.EncodeRequest_EncodingName:
		if enc != nil {
			validate.ID(e, "encoding_name", enc.EncodingName)
			return
		}
	case *baagentv1.DecodeRequest_Model:
		if enc != nil {
			validate.Model(e, "model", enc.Model)
			return
		}
	case *baagentv1.DecodeRequest_EncodingName:
		if enc != nil {
			validate.ID(e, "encoding_name", enc.EncodingName)
			return
		}
	}
	e.Add("encoder", "required: set model or encoding_name")
}
