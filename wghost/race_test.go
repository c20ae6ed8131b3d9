//go:build race

package wghost

const raceEnabled = true
