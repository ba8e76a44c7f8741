// ConsentStore
