package events

import (
	"strconv"
	"strings"
)

// ParseLine reads one line of a module's structured log (log/slog's text
// format: key=value pairs, values quoted as Go strings when they need to be).
// ok is false for lines that are not in that format.
func ParseLine(line string) (fields map[string]string, ok bool) {
	fields = map[string]string{}
	i := 0
	for i < len(line) {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		if i == len(line) {
			break
		}
		eq := strings.IndexByte(line[i:], '=')
		if eq <= 0 || strings.ContainsAny(line[i:i+eq], " \"") {
			return nil, false
		}
		key := line[i : i+eq]
		i += eq + 1
		var value string
		if i < len(line) && line[i] == '"' {
			end := i + 1
			for end < len(line) && line[end] != '"' {
				if line[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(line) {
				return nil, false
			}
			v, err := strconv.Unquote(line[i : end+1])
			if err != nil {
				return nil, false
			}
			value, i = v, end+1
		} else {
			end := strings.IndexByte(line[i:], ' ')
			if end < 0 {
				end = len(line) - i
			}
			value, i = line[i:i+end], i+end
		}
		fields[key] = value
	}
	_, hasMsg := fields["msg"]
	_, hasLevel := fields["level"]
	return fields, hasMsg && hasLevel
}
