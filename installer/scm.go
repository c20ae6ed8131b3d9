package installer

import "github.com/kardianos/service"

// The option names of kardianos/service's Windows backend (its constants
// exist only in its Windows build; these are the same strings).
const (
	optStartType              = "StartType"
	optOnFailure              = "OnFailure"
	optOnFailureDelayDuration = "OnFailureDelayDuration"
	optOnFailureResetPeriod   = "OnFailureResetPeriod"
	optDelayedAutoStart       = "DelayedAutoStart"
)

// scmOptions are the Windows service's settings: started at boot, and
// restarted 2 s after every failure (the one recovery action repeats for
// each further failure; the count resets after a day without one).
func scmOptions() service.KeyValue {
	return service.KeyValue{
		optStartType:              "automatic",
		optDelayedAutoStart:       false,
		optOnFailure:              "restart",
		optOnFailureDelayDuration: "2s",
		optOnFailureResetPeriod:   86400,
	}
}
