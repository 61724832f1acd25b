// Package cmdexit turns the error of an example command's run function into
// its exit status, so that every command treats -h the same way.
package cmdexit

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Code is the process status for a command's error: 0 for nil and for
// flag.ErrHelp (-h or -help: the flag set printed the usage, as asked),
// otherwise 1 after writing "name: err" on w.
func Code(name string, w io.Writer, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(w, "%s: %v\n", name, err)
	return 1
}
