package dash

import (
	"context"
	"errors"
	"io"

	tea "charm.land/bubbletea/v2"
)

// RunTUI runs the dashboard on a terminal until the user quits or ctx ends.
// in must be the terminal's input (not a piped stream), out the terminal.
func RunTUI(ctx context.Context, m *Model, in io.Reader, out io.Writer, env []string) error {
	p := tea.NewProgram(m,
		tea.WithContext(ctx),
		tea.WithInput(in),
		tea.WithOutput(out),
		tea.WithEnvironment(env),
		tea.WithFPS(20),
	)
	_, err := p.Run()
	m.Close()
	if err != nil && errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
