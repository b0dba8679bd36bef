//go:build !linux

package lab

import (
	"errors"
	"os/exec"
)

var errNoPinning = errors.New("CPU pinning is implemented for Linux only")

func allowedCPUs() ([]int, error) { return nil, errNoPinning }

func pinProcess([]int) (func(), error) { return nil, errNoPinning }

func startOn(cmd *exec.Cmd, _ []int) error { return cmd.Start() }
