package image_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/vigilkit/vigil/internal/shipping/image"
)

// BenchmarkShip builds examples/labeler's image twice and prints, for `make
// bench-ship`, one line:
//
//	ship-image: image_build_s=<s> image_mib=<MiB> digest_stable=true|false
//
// image_build_s is the first build, both platforms, compile to index (with
// the Go build cache as it is, or an empty one under VIGIL_BENCH_COLD=1);
// image_mib the compressed layers of the host platform's image;
// digest_stable whether the second build gave the same index digest.
// `make bench-ship` appends the chart's figure to the line.
func BenchmarkShip(b *testing.B) {
	cache := "warm"
	if os.Getenv("VIGIL_BENCH_COLD") != "" {
		b.Setenv("GOCACHE", b.TempDir())
		cache = "cold"
	}
	opts := image.Options{Dir: "../../../examples/labeler", Log: os.Stderr}
	for b.Loop() {
		began := time.Now()
		first, err := image.Build(b.Context(), opts)
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(began)
		second, err := image.Build(b.Context(), opts)
		if err != nil {
			b.Fatal(err)
		}
		var hostBytes int64 = -1
		for _, pi := range first.Images {
			if pi.Platform.OS == "linux" && pi.Platform.Architecture == runtime.GOARCH {
				hostBytes = pi.LayerSize
			}
		}
		if hostBytes < 0 {
			hostBytes = first.Images[0].LayerSize // not a linux/amd64 or arm64 host: the first platform's
		}
		b.ReportMetric(took.Seconds(), "build-s")
		b.ReportMetric(float64(hostBytes)/(1<<20), "host-MiB")
		fmt.Printf("ship-image: image_build_s=%.1f image_mib=%.1f digest_stable=%t\n",
			took.Seconds(), float64(hostBytes)/(1<<20), first.Digest == second.Digest)
		fmt.Printf("ship-image-detail: go_cache=%s digest=%s second_build_s=%.1f\n", cache, first.Digest, time.Since(began).Seconds()-took.Seconds())
	}
}
