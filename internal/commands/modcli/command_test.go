package modcli

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

func module() *spec.Module {
	return &spec.Module{SchemaVersion: spec.SchemaVersion, Name: "demo", Namespace: "demo", TimeoutSeconds: 10}
}

// Every command keeps its flags, their defaults and which of them talk to a
// cluster: modules' manifests, charts and scripts pass them.
func TestCommandsKeepTheirFlags(t *testing.T) {
	t.Setenv(EnvHandoffDir, "")
	kube := map[string]string{"kubeconfig": "", "context": ""}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range kube {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	want := map[string]map[string]string{
		"gate": with(map[string]string{
			"phase": "-1", "handoff-dir": DefaultHandoffDir, "termination-log": "/dev/termination-log", "progress-interval": "5s",
		}),
		"admission": with(map[string]string{
			"addr": ":9443", "metrics-addr": ":8080", "pprof": "false", "cert-dir": "/etc/vigil/tls", "cert-secret": "", "cert-hosts": "[]",
			"handoff-dir": DefaultHandoffDir, "shutdown-delay": "5s", "register": "true", "webhook-url": "",
			"registration-check-interval": "2s", "bootstrap": "false", "ca-file": "", "failure-policy": "[]",
			"ignore-namespace": "[]",
		}),
		"watcher": with(map[string]string{
			"leader-elect": "true", "lease-duration": "15s", "renew-deadline": "10s", "retry-period": "2s", "reconcile-spacing": "200ms",
			"audit-interval": "1h0m0s", "metrics-addr": ":8080", "pprof": "false", "probe-addr": ":8081", "outage-check-interval": "2s", "failure-policy": "[]",
			"ignore-namespace": "[]",
		}),
		"unregister": with(map[string]string{
			"remove-finalizers": "false", "stop-watcher": "false", "delete-state": "false", "stop-watcher-timeout": "2m0s",
		}),
		"chart":     {"output-dir": "", "image": "", "allow-deadlock": "false", "kubernetes": "", "admission-memory-limit": "256Mi", "watcher-memory-limit": "512Mi", "cluster": "false", "kubeconfig": "", "context": ""},
		"zarf":      {"output-dir": "", "image": "", "allow-deadlock": "false"},
		"manifests": {"image": "", "namespace": "", "replicas": "2", "output-dir": "", "ca-bundle": "", "allow-deadlock": "false", "with": "[]", "network-policy": "true", "kubernetes": "", "ignore-namespace": "[]", "admission-memory-limit": "256Mi", "watcher-memory-limit": "512Mi"},
		"plan":      with(map[string]string{"output": "text", "with": "[]", "cluster": "false", "admission-memory-limit": "256Mi", "watcher-memory-limit": "512Mi"}),
	}
	root := NewCommand(module(), nil, &bytes.Buffer{}, &bytes.Buffer{})
	seen := map[string]bool{}
	for _, cmd := range root.Commands() {
		name := cmd.Name()
		flags, ok := want[name]
		if !ok {
			continue // cobra's help and completion
		}
		seen[name] = true
		n := 0
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			n++
			def, ok := flags[f.Name]
			if !ok {
				t.Errorf("%s --%s: not a flag of the command", name, f.Name)
				return
			}
			if f.DefValue != def {
				t.Errorf("%s --%s defaults to %q, want %q", name, f.Name, f.DefValue, def)
			}
		})
		if n != len(flags) {
			t.Errorf("%s has %d flags, want %d", name, n, len(flags))
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("no command %s", name)
		}
	}
	for _, short := range []struct{ cmd, flag, short string }{{"chart", "output-dir", "o"}, {"manifests", "output-dir", "o"}, {"plan", "output", "o"}} {
		cmd, _, err := root.Find([]string{short.cmd})
		if err != nil {
			t.Fatal(err)
		}
		if f := cmd.Flags().Lookup(short.flag); f == nil || f.Shorthand != short.short {
			t.Errorf("%s --%s: want the shorthand -%s", short.cmd, short.flag, short.short)
		}
	}
}

// A flag mistake is said before anything starts, in the words of the flag,
// and exits 1.
func TestFlagMistakesExitOne(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
	missing := filepath.Join(t.TempDir(), "kubeconfig")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gate"}, "--phase: expected the phase to run, 0 or more"},
		{[]string{"gate", "--phase", "0", "--kubeconfig", missing}, "the kubeconfig " + missing + " (from --kubeconfig) does not exist"},
		{[]string{"admission", "--kubeconfig", missing}, "the kubeconfig " + missing + " (from --kubeconfig) does not exist"},
		{[]string{"admission", "--failure-policy", "x=Fail", "--kubeconfig", missing}, `--failure-policy "x=Fail": module demo has no capability "x"`},
		{[]string{"watcher", "--failure-policy", "x", "--kubeconfig", missing}, `--failure-policy "x": expected CAPABILITY=Fail or CAPABILITY=Ignore`},
		{[]string{"unregister", "--kubeconfig", missing}, "the kubeconfig " + missing + " (from --kubeconfig) does not exist"},
		{[]string{"chart", "--image", "x"}, "-o: expected the folder to write the chart into"},
		{[]string{"manifests", "--image", "x", "--replicas", "0"}, "--replicas 0: expected 1 or more"},
		{[]string{"manifests", "--image", "x", "--ca-bundle", missing}, "--ca-bundle: "},
		{[]string{"plan", "-o", "yaml"}, `-o "yaml": expected text or json`},
		{[]string{"plan", "--with", missing}, "--with " + missing},
		{[]string{"plan", "--kubeconfig", missing}, "--kubeconfig, --context: it reads a cluster with --cluster only"},
		{[]string{"plan", "--cluster", "--kubeconfig", missing}, "the kubeconfig " + missing + " (from --kubeconfig) does not exist"},
		{[]string{"plan", "extra"}, `unknown command "extra"`},
		{[]string{"plan", "--watcher-memory-limit", "lots"}, `--watcher-memory-limit "lots": expected a memory quantity, as in 512Mi or 2Gi`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := Execute(context.Background(), module(), nil, tc.args, &out, &errOut); code != cmdutil.ExitFailed {
				t.Errorf("exit %d, want %d", code, cmdutil.ExitFailed)
			}
			if !strings.Contains(errOut.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", errOut.String(), tc.want)
			}
		})
	}
}

// A module with definition mistakes runs no command.
func TestDefinitionMistakesStopEveryCommand(t *testing.T) {
	for _, cmd := range []string{"gate", "admission", "watcher", "unregister", "chart", "manifests", "plan"} {
		var out, errOut bytes.Buffer
		code := Execute(context.Background(), module(), errors.New("two gates named a"), []string{cmd}, &out, &errOut)
		if code != cmdutil.ExitFailed || !strings.Contains(errOut.String(), "module demo has definition mistakes:\ntwo gates named a") {
			t.Errorf("%s: exit %d, stderr %q", cmd, code, errOut.String())
		}
		if out.Len() > 0 {
			t.Errorf("%s printed %q", cmd, out.String())
		}
	}
}

// plan prints the module in words, ending with the deadlock analysis, or as
// JSON that reads back as the module.
func TestPlanPrintsWordsOrJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Execute(context.Background(), module(), nil, []string{"plan"}, &out, &errOut); code != cmdutil.ExitOK {
		t.Fatalf("plan: exit %d: %s", code, errOut.String())
	}
	if !strings.HasSuffix(out.String(), "\ndeadlocks: none found\n") {
		t.Errorf("plan does not end with the deadlock analysis:\n%s", out.String())
	}
	out.Reset()
	if code := Execute(context.Background(), module(), nil, []string{"plan", "-o", "json"}, &out, &errOut); code != cmdutil.ExitOK {
		t.Fatalf("plan -o json: exit %d: %s", code, errOut.String())
	}
	back, err := spec.Decode(out.Bytes())
	if err != nil || back.Name != "demo" || back.Namespace != "demo" {
		t.Errorf("plan -o json reads back as %+v, %v", back, err)
	}
	dir := t.TempDir()
	out.Reset()
	if code := Execute(context.Background(), module(), nil, []string{"chart", "-o", dir, "--image", "ghcr.io/acme/demo:1.0.0"}, &out, &errOut); code != cmdutil.ExitOK {
		t.Fatalf("chart: exit %d: %s", code, errOut.String())
	}
	if want := "chart of module demo written to " + dir + "\n"; out.String() != want {
		t.Errorf("chart printed %q, want %q", out.String(), want)
	}
}
