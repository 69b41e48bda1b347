package policytest

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// Outcome is one case's run: its result, how it differs from what it
// expects, or the error that kept it from running.
type Outcome struct {
	Case    Case
	Result  Result
	Diff    []string
	Err     error
	Elapsed time.Duration
}

// Passed reports whether the case ran and answered as expected.
func (o Outcome) Passed() bool { return o.Err == nil && len(o.Diff) == 0 }

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the outcomes as JUnit XML: one suite, named suite, with
// a test case per case (its file as class name), a failure for each that
// answered otherwise than expected and an error for each that did not run.
func WriteJUnit(w io.Writer, suite string, outcomes []Outcome) error {
	s := junitSuite{Name: suite, Tests: len(outcomes)}
	var total time.Duration
	for _, o := range outcomes {
		total += o.Elapsed
		jc := junitCase{Name: o.Case.Name, Classname: o.Case.File, Time: seconds(o.Elapsed)}
		switch {
		case o.Err != nil:
			s.Errors++
			jc.Error = &junitMessage{Message: firstLine(o.Err.Error()), Text: o.Err.Error()}
		case len(o.Diff) > 0:
			s.Failures++
			jc.Failure = &junitMessage{Message: o.Diff[0], Text: strings.Join(o.Diff, "\n")}
		}
		s.Cases = append(s.Cases, jc)
	}
	s.Time = seconds(total)
	doc := junitSuites{Tests: s.Tests, Failures: s.Failures, Errors: s.Errors, Suites: []junitSuite{s}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
