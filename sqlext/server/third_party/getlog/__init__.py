__all__ = ['ttypes', 'constants', 'TGetLogService']
