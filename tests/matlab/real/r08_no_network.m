% Pattern: a data-preparation script that builds no network.
% Expected: attnlab analyze says it builds no network and exits 2.
data = rand(100, 3);
mu = mean(data);
sig = 2;
