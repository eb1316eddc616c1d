package parse

import (
	"fmt"
	"strings"
)

// Spec is how a log's format was given, as the input flags give it: a preset (or
// "auto"), an nginx log_format string, a log_format in nginx.conf, JSON keys, the
// request headers HAProxy captures, and the one attempt header to trust. Its errors
// name those flags.
type Spec struct {
	Preset                string // --log-format: auto, json, or a preset's name
	PresetGiven           bool   // --log-format was given, not defaulted
	NginxFormat, Escape   string // --nginx-format, --escape
	NginxConf, FormatName string // --nginx-conf, --log-format-name
	Fields                []string
	Captures              string // --haproxy-captures, comma-separated
	CapturesGiven         bool
	AttemptHeader         string
}

// Format returns the format s gives; nil means detect each file's.
func (s Spec) Format() (*Format, error) {
	f, err := s.base()
	if err != nil {
		return nil, err
	}
	if s.CapturesGiven && (f == nil || f.Name != "haproxy") {
		return nil, fmt.Errorf("--haproxy-captures goes with --log-format haproxy")
	}
	if len(s.Fields) > 0 {
		if f, err = WithFields(f, s.Fields); err != nil { // nil: any JSON, the --field keys alone
			return nil, err
		}
	}
	if s.AttemptHeader == "" {
		return f, nil
	}
	if f == nil {
		return nil, fmt.Errorf("--attempt-header needs the format given: --log-format, --nginx-format or --nginx-conf")
	}
	if f, err = f.OnlyAttemptHeader(s.AttemptHeader); err != nil {
		return nil, fmt.Errorf("--attempt-header: %w", err)
	}
	return f, nil
}

func (s Spec) base() (*Format, error) {
	if s.NginxConf != "" || s.FormatName != "" {
		if s.NginxConf == "" {
			return nil, fmt.Errorf("--log-format-name names a log_format of --nginx-conf: give both")
		}
		if s.NginxFormat != "" || s.PresetGiven {
			return nil, fmt.Errorf("--nginx-conf, --nginx-format and --log-format are exclusive")
		}
		f, err := FromNginxConf(s.NginxConf, s.FormatName)
		if err != nil {
			return nil, fmt.Errorf("--nginx-conf: %w", err)
		}
		return f, nil
	}
	if s.NginxFormat != "" {
		if s.PresetGiven {
			return nil, fmt.Errorf("--log-format and --nginx-format are exclusive")
		}
		esc, err := ParseEscape(s.Escape)
		if err != nil {
			return nil, fmt.Errorf("--escape: %w", err)
		}
		f, err := Compile(s.NginxFormat, esc)
		if err != nil {
			return nil, fmt.Errorf("--nginx-format: %w", err)
		}
		return f, nil
	}
	switch s.Preset {
	case "auto", "":
		return nil, nil
	case "json":
		if len(s.Fields) == 0 {
			return nil, fmt.Errorf("--log-format json reads the keys --field names: give at least one --field NAME=KEY.PATH")
		}
		return nil, nil
	case "haproxy":
		captures := DefaultHAProxyCaptures
		if s.Captures != "" {
			captures = strings.Split(s.Captures, ",")
		}
		f, err := HAProxy(captures)
		if err != nil {
			return nil, fmt.Errorf("--haproxy-captures: %w", err)
		}
		return f, nil
	}
	f, err := Preset(s.Preset)
	if err != nil {
		return nil, fmt.Errorf("--log-format: %w", err)
	}
	return f, nil
}
