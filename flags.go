package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/alecthomas/kong"
	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/check"
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

// writeFailure prints err, which ends check with exitError, as check
// --output json's answer; the error goes to stderr as well, as any.
func writeFailure(w io.Writer, err error) {
	check.WriteFailure(w, err, exitError)
}

// checkJSON tells whether a command line kong refused asked for check
// --output json, as far as kong read it before refusing.
func checkJSON(err error) bool {
	var pe *kong.ParseError
	if !errors.As(err, &pe) || pe.Context == nil {
		return false
	}
	if sel := pe.Context.Selected(); sel == nil || sel.Name != "check" {
		return false
	}
	for _, p := range pe.Context.Path {
		if p.Flag != nil && p.Flag.Name == "output" {
			return pe.Context.FlagValue(p.Flag) == "json"
		}
	}
	return false
}
