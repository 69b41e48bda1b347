package vigiltest_test

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vigilkit/vigil/vigiltest"
)

// exitWithoutStopEnv makes the test binary start a control plane, print its
// address and exit without stopping it, as a test that calls os.Exit or
// hits -timeout does.
const exitWithoutStopEnv = "VIGILTEST_EXIT_WITHOUT_STOP"

func exitWithoutStop() int {
	e, err := vigiltest.Start(vigiltest.Options{})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("host", e.Config.Host)
	return 0
}

// A test binary that ends without Stop takes its control plane with it:
// nothing of it is left serving.
func TestTheControlPlaneEndsWithATestBinaryThatNeverStopsIt(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), exitWithoutStopEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the child test binary: %v\n%s", err, out)
	}
	var host string
	for sc := bufio.NewScanner(strings.NewReader(string(out))); sc.Scan(); {
		if h, ok := strings.CutPrefix(sc.Text(), "host "); ok {
			host = h
		}
	}
	if host == "" {
		t.Fatalf("the child printed no host line:\n%s", out)
	}
	u, err := url.Parse(host)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", u.Host, time.Second)
		if err != nil {
			return // nothing listens there any more
		}
		_ = c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver still serves at %s 20s after its test binary exited without Stop", u.Host)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
