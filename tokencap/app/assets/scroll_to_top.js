document.querySelector('[data-testid="stMain"]')?.scrollTo(0, 0);
