package dash

import "charm.land/bubbles/v2/key"

// keyMap holds every binding; the help bar shows those of the current view.
type keyMap struct {
	Up, Down, PgUp, PgDown, Top, Bottom key.Binding
	Prev, Next                          key.Binding
	Enter, Back, Tab, ShiftTab          key.Binding
	Filter, Pause, Faster, Slower, Stop key.Binding
	Help, Quit                          key.Binding
}

func newKeyMap() keyMap {
	return keyMap{
		Up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑↓", "move")),
		Down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PgUp:     key.NewBinding(key.WithKeys("pgup", "ctrl+u"), key.WithHelp("pgup", "page up")),
		PgDown:   key.NewBinding(key.WithKeys("pgdown", "ctrl+d", "space"), key.WithHelp("pgdn", "page down")),
		Top:      key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g", "top")),
		Bottom:   key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G", "follow")),
		Prev:     key.NewBinding(key.WithKeys("left", "h", "["), key.WithHelp("←/→", "worker")),
		Next:     key.NewBinding(key.WithKeys("right", "l", "]"), key.WithHelp("→", "next worker")),
		Enter:    key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open")),
		Back:     key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		Tab:      key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "view")),
		ShiftTab: key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "previous view")),
		Filter:   key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		Pause:    key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "pause")),
		Faster:   key.NewBinding(key.WithKeys("+", "="), key.WithHelp("+/-", "speed")),
		Slower:   key.NewBinding(key.WithKeys("-", "_"), key.WithHelp("-", "slower")),
		Stop:     key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "stop")),
		Help:     key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "keys")),
		Quit:     key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
	}
}
