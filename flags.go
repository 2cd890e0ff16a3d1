package main

import (
	"fmt"
	"io"

	"github.com/rs/zerolog"
)

// runEnv is what every command's Run receives.
type runEnv struct {
	stdout  io.Writer
	log     zerolog.Logger
	version string // for serve's landing page
}

// Exit codes: 0 fine, 1 drift found, 2 any error (bad flags included).
const (
	exitDrift = 1
	exitError = 2
)

// exitCode carries a status other than success or error out of a command.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
