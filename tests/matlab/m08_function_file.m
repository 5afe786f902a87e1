function net = buildNet(numHeads)
% a function file: the first function runs, local functions below it
layers = [sequenceInputLayer(4, Name="in")
          encoderBlock(numHeads, 8, "b1")
          fullyConnectedLayer(2, Name="out")];
net = dlnetwork(layers);
end

function layers = encoderBlock(h, d, prefix)
layers = [fullyConnectedLayer(d, Name=prefix + "_fc")
          selfAttentionLayer(h, d, Name=prefix + "_sa")
          reluLayer(Name=prefix + "_relu")];
end
