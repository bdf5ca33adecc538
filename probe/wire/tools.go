// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

// Tools are configured once, in the OpenAI chat format
// ({type: function, function: {name, description, parameters}}, and
// tool_choice auto, none, required or {type: function, function: {name}}),
// and sent in the format of each API:
//
//	chat       as configured
//	responses  {type: function, name, description, parameters}; a named
//	           choice is {type: function, name}
//	messages   {name, description, input_schema}; tool_choice
//	           {type: auto | none | any | tool, name}

// ToolsFor converts a class's tools and tool_choice to api's format.
func ToolsFor(api API, tools []map[string]any, choice any) (any, any) {
	out := make([]any, 0, len(tools))
	for _, t := range tools {
		fn, _ := t["function"].(map[string]any)
		switch api {
		case APIResponses:
			m := map[string]any{"type": "function"}
			for k, v := range fn {
				m[k] = v
			}
			out = append(out, m)
		case APIMessages:
			m := map[string]any{"name": fn["name"]}
			if d, ok := fn["description"]; ok {
				m["description"] = d
			}
			schema, ok := fn["parameters"]
			if !ok {
				schema = map[string]any{"type": "object"}
			}
			m["input_schema"] = schema
			out = append(out, m)
		default:
			out = append(out, t)
		}
	}
	return out, toolChoiceFor(api, choice)
}

func toolChoiceFor(api API, choice any) any {
	var named string
	if m, ok := choice.(map[string]any); ok {
		fn, _ := m["function"].(map[string]any)
		named, _ = fn["name"].(string)
	}
	switch api {
	case APIResponses:
		if named != "" {
			return map[string]any{"type": "function", "name": named}
		}
	case APIMessages:
		switch {
		case named != "":
			return map[string]any{"type": "tool", "name": named}
		case choice == "required":
			return map[string]any{"type": "any"}
		case choice == "auto", choice == "none":
			return map[string]any{"type": choice}
		}
	}
	return choice
}
