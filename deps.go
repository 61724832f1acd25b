//go:build tools

package dsv4go

import (
	_ "github.com/dlclark/regexp2"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/nikolalohinski/gonja/v2"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/x448/float16"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/sys/unix"
	_ "google.golang.org/grpc"
)
