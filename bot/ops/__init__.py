"""Operations: logs, start-up, the first Redis check, supervision, retries, periodic sweeps."""
