// Ring
